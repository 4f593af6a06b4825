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

	// unackedIndexOptions are the storage settings of each topic's
	// unacknowledged index, by its table.
	unackedIndexOptions := func() map[string][]string {
		t.Helper()
		rows, err := db.SQL.Query(`SELECT x.indrelid::regclass::text, x.indexrelid::regclass::text
			FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
			WHERE i.inhparent = 'outbox.messages_unacked_idx'::regclass`)
		require.NoError(t, err)
		indexes := map[string]string{}
		for rows.Next() {
			var table, index string
			require.NoError(t, rows.Scan(&table, &index))
			indexes[table] = index
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		options := map[string][]string{}
		for table, index := range indexes {
			options[table] = reloptions(t, db, index)
		}
		return options
	}
	every := func(o []string) map[string][]string {
		return map[string][]string{"outbox.pin_promotion_purchase_changed_v1": o,
			"outbox.pin_test_before_v1": o, "outbox.pin_test_after_v1": o}
	}
	packed := []string{"fillfactor=100"}
	require.Equal(t, every(packed), unackedIndexOptions())

	_, err = goose.DownTo(ctx, 13)
	require.NoError(t, err)
	require.Equal(t, every(nil), unackedIndexOptions())
	_, err = goose.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, every(packed), unackedIndexOptions())
}
