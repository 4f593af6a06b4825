package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestBelow00012RefusesWhileAnotherTopicHasATable: going below 00012 would
// leave another topic's rows with no table to go to, so the Down refuses and
// changes nothing; once that table is dropped, it goes down and back up.
func TestBelow00012RefusesWhileAnotherTopicHasATable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`SELECT outbox.create_topic('pin.test.other.v1')`)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 12) // any migration after 00012 first
	require.NoError(t, err)

	_, err = goose.DownTo(ctx, 11)
	require.ErrorContains(t, err, "other topics have tables in outbox.messages")
	version, err := goose.GetDBVersion(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 12, version, "the refused Down changed nothing")

	_, err = db.SQL.Exec(`DROP TABLE outbox.pin_test_other_v1`)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 11)
	require.NoError(t, err)
	_, err = goose.Up(ctx)
	require.NoError(t, err)
}

// TestUnacknowledgedIndexesArePacked: 00014 packs the unacknowledged index of
// every topic's table, the promotion module's and one made before it, and
// outbox.create_topic packs a new topic's; its Down leaves them as 00012
// made them, and applied again it packs them again.
func TestUnacknowledgedIndexesArePacked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 13)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`SELECT outbox.create_topic('pin.test.before.v1')`)
	require.NoError(t, err)
	_, err = goose.Up(ctx)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`SELECT outbox.create_topic('pin.test.after.v1')`)
	require.NoError(t, err)

	unackedIndexOptions := func() map[string]string {
		t.Helper()
		rows, err := db.SQL.Query(`SELECT x.indrelid::regclass::text, COALESCE(array_to_string(c.reloptions, ','), '')
			FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'outbox.messages_unacked_idx'::regclass`)
		require.NoError(t, err)
		defer func() { _ = rows.Close() }()
		options := map[string]string{}
		for rows.Next() {
			var table, o string
			require.NoError(t, rows.Scan(&table, &o))
			options[table] = o
		}
		require.NoError(t, rows.Err())
		return options
	}
	const packed = "fillfactor=100"
	require.Equal(t, map[string]string{
		"outbox.pin_promotion_purchase_changed_v1": packed,
		"outbox.pin_test_before_v1":                packed,
		"outbox.pin_test_after_v1":                 packed,
	}, unackedIndexOptions())

	_, err = goose.DownTo(ctx, 13)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"outbox.pin_promotion_purchase_changed_v1": "",
		"outbox.pin_test_before_v1":                "",
		"outbox.pin_test_after_v1":                 "",
	}, unackedIndexOptions())
	_, err = goose.Up(ctx)
	require.NoError(t, err)
	require.Len(t, unackedIndexOptions(), 3)
	for table, o := range unackedIndexOptions() {
		require.Equal(t, packed, o, table)
	}
}
