package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestDeadLetterBytesKeepExistingRows: a consumer dead letter written before
// 00006 keeps its row, gains its header list rebuilt from the jsonb it had,
// and is still there after 00006 is reverted.
func TestDeadLetterBytesKeepExistingRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 5)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, record_key, headers, value, error, attempts)
		VALUES ('boost', 't', 1, 7, 'k', '{"message_id": "m", "b": "2"}', 'v', 'e', 1)`)
	require.NoError(t, err)

	_, err = goose.UpTo(ctx, 6)
	require.NoError(t, err)
	var keys, values, refused string
	require.NoError(t, db.SQL.QueryRow(`
		SELECT array_to_string(ARRAY(SELECT convert_from(k, 'UTF8') FROM unnest(header_keys) k), ','),
		       array_to_string(ARRAY(SELECT convert_from(v, 'UTF8') FROM unnest(header_values) v), ','),
		       coalesce(refused_sqlstate, 'none')
		FROM consumer.dead_letters`).Scan(&keys, &values, &refused))
	require.Equal(t, "b,message_id", keys)
	require.Equal(t, "2,m", values)
	require.Equal(t, "none", refused)
	_, err = db.SQL.Exec(`INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, error, attempts, header_keys, header_values)
		VALUES ('boost', 't', 1, 8, 'e', 1, ARRAY['\x00'::bytea], '{}')`)
	require.ErrorContains(t, err, "dead_letters_header_pairs", "a header key without its value")

	_, err = goose.DownTo(ctx, 5)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM consumer.dead_letters WHERE headers->>'message_id' = 'm'`).Scan(&n))
	require.Equal(t, 1, n)
	_, err = goose.UpTo(ctx, 6)
	require.NoError(t, err)
}
