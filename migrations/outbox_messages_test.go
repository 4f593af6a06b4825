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
