package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
)

func TestMissingNamesTheKeysNoRowHasInTheirOrder(t *testing.T) {
	t.Parallel()
	type row struct{ ID int64 }
	found := []row{{ID: 2}, {ID: 4}}

	missing := postgres.Missing([]int64{5, 2, 1, 4}, found, func(r row) int64 { return r.ID })

	require.Equal(t, []string{"5", "1"}, missing)
	require.Empty(t, postgres.Missing([]int64{2, 4}, found, func(r row) int64 { return r.ID }))
}
