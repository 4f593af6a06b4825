package postgres

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/require"
)

func TestWithSessionParams(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable":                            "postgres://u@h:5432/db?connect_timeout=2&jit=off&sslmode=disable&timezone=UTC",
		"postgres://u@h/db?TimeZone=Europe/Moscow&jit=on&connect_timeout=7": "postgres://u@h/db?TimeZone=Europe/Moscow&jit=on&connect_timeout=7",
		"host=h dbname=db":                      "host=h dbname=db connect_timeout=2 jit=off timezone=UTC",
		"host=h dbname=db timezone=UTC jit=off": "host=h dbname=db timezone=UTC jit=off connect_timeout=2",
	} {
		got, err := withSessionParams(in, PoolConfig{})
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	got, err := withSessionParams("postgres://u@h/db", APIPool)
	require.NoError(t, err)
	require.Equal(t, "postgres://u@h/db?connect_timeout=2&idle_in_transaction_session_timeout=5000&jit=off&lock_timeout=2000&statement_timeout=5000&timezone=UTC", got)
	got, err = withSessionParams("host=h", APIPool)
	require.NoError(t, err)
	require.Equal(t, "host=h connect_timeout=2 idle_in_transaction_session_timeout=5000 jit=off lock_timeout=2000 statement_timeout=5000 timezone=UTC", got)
}

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://u:xxxxx@h/db", Redact("postgres://u:secret@h/db"))
	require.Equal(t, "postgres://u@h/db", Redact("postgres://u@h/db"))
}

// TestApplicationNameNamesInstanceAndRole: pin/<hostname>-<pid>/<role>,
// at most the 63 bytes PostgreSQL keeps, the role kept whole; a URL that
// names its own application_name keeps it.
func TestApplicationNameNamesInstanceAndRole(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	name := ApplicationName("relay")
	require.Equal(t, fmt.Sprintf("pin/%s-%d/relay", host, os.Getpid())[max(0, len(name)-63):], name)
	require.LessOrEqual(t, len(ApplicationName(strings.Repeat("r", 40))), 63)
	require.True(t, strings.HasSuffix(ApplicationName(strings.Repeat("r", 40)), "/"+strings.Repeat("r", 40)))

	got, err := withSessionParams("postgres://u@h/db", PoolConfig{ApplicationName: "pin/h-1/api"})
	require.NoError(t, err)
	require.Equal(t, "postgres://u@h/db?application_name=pin%2Fh-1%2Fapi&connect_timeout=2&jit=off&timezone=UTC", got)
	got, err = withSessionParams("postgres://u@h/db?application_name=mine", PoolConfig{ApplicationName: "pin/h-1/api"})
	require.NoError(t, err)
	require.Equal(t, "postgres://u@h/db?application_name=mine&connect_timeout=2&jit=off&timezone=UTC", got)
}

// TestHostListsSurviveTheURLRewrites: a URL that lists several hosts
// (ADR 0021), IPv6 literals included, which net/url cannot parse, keeps its
// hosts and target_session_attrs through the session parameters and pgx's
// parser, and its password out of Redact.
func TestHostListsSurviveTheURLRewrites(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"postgres://u:secret@db-a:5432,db-b:5433/pin?sslmode=disable&target_session_attrs=read-write",
		"postgres://u:secret@[::1]:5432,[::2]:5433/pin?sslmode=disable&target_session_attrs=read-write",
	} {
		got, err := withSessionParams(in, APIPool)
		require.NoError(t, err)
		cfg, err := pgx.ParseConfig(got)
		require.NoError(t, err, got)
		require.Len(t, cfg.Fallbacks, 1, got)
		require.Equal(t, uint16(5433), cfg.Fallbacks[0].Port)
		require.NotNil(t, cfg.ValidateConnect, "target_session_attrs=read-write is kept")
		require.Equal(t, "5000", cfg.RuntimeParams["statement_timeout"])
		require.NotContains(t, Redact(in), "secret")
		require.Contains(t, Redact(in), "u:xxxxx@")
	}
}
