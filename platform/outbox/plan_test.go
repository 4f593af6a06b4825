package outbox_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestRelayReadsTheOutboxAsItIsNow: the relay keeps its session for as long
// as it leads, and reads the outbox many times a second. A statement
// prepared on that session would keep the plan PostgreSQL made on its first
// read, of an outbox that was then empty: a sequential scan, which after the
// outbox has grown to a retention's worth of acknowledged rows walks all of
// them on every read, until an ANALYZE happens to invalidate the plan
// (never, with autovacuum off). The snapshot's 10k events cost the API twice
// its p99 that way. Each read must instead be planned for the table it
// reads: no read walks the acknowledged rows.
func TestRelayReadsTheOutboxAsItIsNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	b.startRelay(t, relay.Config{Brokers: brokers}, nil)

	// The relay reads, and acknowledges, while the outbox is nearly empty.
	b.publish(t, event("k", 1))
	waitFor(t, "the first message to be acknowledged", func() bool { n, _, _ := b.stats(t); return n == 0 })

	// Then the outbox holds what a week of traffic leaves acknowledged.
	const kept = 20000
	_, err := b.db.SQL.ExecContext(b.ctx, `INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked)
		SELECT $2, gen_random_uuid()::text, '{}', '{}', true FROM generate_series(1, $1)`, kept, topic)
	require.NoError(t, err)
	// The statistics are the topic's table's, the partition the reads prune to.
	_, err = b.db.SQL.ExecContext(b.ctx, `SELECT pg_stat_reset_single_table_counters(('outbox.' || outbox.topic_table($1))::regclass)`, topic)
	require.NoError(t, err)
	for seq := 2; seq <= 4; seq++ {
		b.publish(t, event("k", seq))
	}

	// The statistics reach pg_stat_user_tables within a second or so of
	// each read; wait for those of a few dozen reads, every one of them the
	// relay's (nothing else reads the table meanwhile).
	var scans, seqScans, seqRead int64
	testbed.Eventually(t, func() error {
		err := b.db.SQL.QueryRowContext(b.ctx, `SELECT seq_scan + COALESCE(idx_scan, 0), seq_scan, seq_tup_read
			FROM pg_stat_user_tables WHERE relid = ('outbox.' || outbox.topic_table($1))::regclass`, topic).Scan(&scans, &seqScans, &seqRead)
		if err == nil && scans < 30 {
			err = fmt.Errorf("%d reads of the outbox counted so far", scans)
		}
		return err
	})
	require.Less(t, seqRead, int64(kept),
		"%d of %d reads of the outbox were sequential scans, reading %d rows: a plan made for the empty outbox", seqScans, scans, seqRead)
}
