package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWithUTC(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable":   "postgres://u@h:5432/db?sslmode=disable&timezone=UTC",
		"postgres://u@h/db?TimeZone=Europe/Moscow": "postgres://u@h/db?TimeZone=Europe/Moscow",
		"host=h dbname=db":                         "host=h dbname=db timezone=UTC",
		"host=h dbname=db timezone=UTC":            "host=h dbname=db timezone=UTC",
	} {
		got, err := withUTC(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://u:xxxxx@h/db", Redact("postgres://u:secret@h/db"))
	require.Equal(t, "postgres://u@h/db", Redact("postgres://u@h/db"))
}
