package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// hotTableOptions are the storage settings 00007 gives the tables that churn
// like queues (docs/performance.md, "Hot tables").
var hotTableOptions = map[string][]string{
	"boost.target_boosts": {"fillfactor=20",
		"autovacuum_vacuum_scale_factor=0.05", "autovacuum_vacuum_threshold=100", "autovacuum_vacuum_cost_delay=0"},
	"boost.purchase_targets": {
		"autovacuum_vacuum_scale_factor=0.02", "autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_cost_delay=1"},
	`outbox."pin_promotion_purchase_changed_v1"`: {
		"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_cost_delay=1"},
	"consumer.inbox": {
		"autovacuum_vacuum_scale_factor=0.02", "autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_cost_delay=1"},
	"consumer.aggregate_versions": {
		"autovacuum_vacuum_scale_factor=0.02", "autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_cost_delay=1"},
	"consumer.dead_letters": {"autovacuum_vacuum_scale_factor=0.05", "autovacuum_vacuum_threshold=50"},
	"outbox.dead_letters":   {"autovacuum_vacuum_scale_factor=0.05", "autovacuum_vacuum_threshold=50"},
}

// TestHotTablesHaveTheirStorageSettings reads pg_class.reloptions of every
// hot table after the migrations, after 00007 is reverted (the defaults and
// the boost projection's partial index are back), and after it is applied
// again.
func TestHotTablesHaveTheirStorageSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)

	requireOptions := func(applied bool) {
		t.Helper()
		for table, want := range hotTableOptions {
			got := reloptions(t, db, table)
			if applied {
				require.ElementsMatch(t, want, got, table)
			} else {
				require.Empty(t, got, table)
			}
		}
		var partial bool
		require.NoError(t, db.SQL.QueryRowContext(ctx,
			`SELECT to_regclass('boost.target_boosts_emptied_idx') IS NOT NULL`).Scan(&partial))
		require.Equal(t, !applied, partial, "the partial index on active_purchases exists only without 00007")
	}

	requireOptions(true)
	_, err = goose.DownTo(ctx, 6)
	require.NoError(t, err)
	requireOptions(false)
	_, err = goose.UpTo(ctx, 7)
	require.NoError(t, err)
	requireOptions(true)
}

// reloptions returns the storage settings of table, as "name=value".
func reloptions(t *testing.T, db *testbed.Database, table string) []string {
	t.Helper()
	rows, err := db.SQL.Query(`SELECT o FROM pg_class, unnest(reloptions) AS o WHERE pg_class.oid = $1::regclass`, table)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var options []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		options = append(options, o)
	}
	require.NoError(t, rows.Err())
	return options
}
