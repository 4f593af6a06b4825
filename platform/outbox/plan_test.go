package outbox_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestRelayReadsTheOutboxAsItIsNow: the relay keeps its session for as long
// as it leads, and reads the outbox many times a second, with statements it
// prepares once on that session. A plan kept from its first read, of an
// outbox that was then empty, walks whatever the outbox holds later on
// every read: a sequential scan, or the primary key (which an empty,
// analyzed table costs the same as the unacknowledged index). After the
// outbox has grown to a retention's worth of acknowledged rows, that is all
// of them, until an ANALYZE happens to invalidate the plan (never, with
// autovacuum off); the snapshot's 10k events cost the API twice its p99
// that way. The relay makes its plans again every second
// (store.ForgetPlans): within a few seconds, no read touches the
// acknowledged rows, whether it scans them or fetches them by an index.
func TestRelayReadsTheOutboxAsItIsNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	// The worst start: the topic's table analyzed while empty.
	testbed.Analyze(t, b.db.SQL, "outbox."+topicTable(t, b))
	b.startRelay(t, relay.Config{Brokers: brokers}, nil)
	// It reads the empty outbox a few times (nothing else reads it yet).
	testbed.Eventually(t, func() error {
		if n := b.reads(t); n < 3 {
			return fmt.Errorf("%d reads of the outbox counted so far", n)
		}
		return nil
	})

	// The relay reads, and acknowledges, while the outbox is nearly empty.
	b.publish(t, event("k", 1))
	waitFor(t, "the first message to be acknowledged", func() bool { n, _, _ := b.stats(t); return n == 0 })

	// Then the outbox holds what a week of traffic leaves acknowledged.
	const kept = 20000
	_, err := b.db.SQL.ExecContext(b.ctx, `INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked)
		SELECT $2, gen_random_uuid()::text, '{}', '{}', true FROM generate_series(1, $1)`, kept, topic)
	require.NoError(t, err)

	// Each try publishes three events and counts the rows the relay touched
	// to send them: its reads and acknowledgements reach
	// pg_stat_user_tables together, within a second or so, and nothing else
	// reads the table meanwhile. A read that walks the acknowledged rows
	// touches all of them. The counts are differences: resetting a table's
	// counters leaves its indexes', which idx_tup_fetch adds up.
	seq := 1
	testbed.Eventually(t, func() error {
		before := b.touched(t)
		for range 3 {
			seq++
			b.publish(t, event("k", seq))
		}
		var after tableCounts
		testbed.Eventually(t, func() error {
			if after = b.touched(t); after.updates-before.updates < 3 {
				return fmt.Errorf("%d of 3 acknowledgements counted so far", after.updates-before.updates)
			}
			return nil
		})
		if n := after.touched - before.touched; n >= kept {
			return fmt.Errorf("sending 3 events touched %d rows (%d sequential scans) of %d acknowledged: a plan made for the empty outbox",
				n, after.seqScans-before.seqScans, kept)
		}
		return nil
	})
}

// tableCounts are the statistics of the test topic's table that
// TestRelayReadsTheOutboxAsItIsNow reads.
type tableCounts struct {
	updates, seqScans, touched int64 // touched: rows read whole or fetched through an index
}

func (b testBundle) touched(tb testing.TB) tableCounts {
	tb.Helper()
	var c tableCounts
	require.NoError(tb, b.db.SQL.QueryRowContext(b.ctx, `SELECT n_tup_upd, seq_scan, seq_tup_read + COALESCE(idx_tup_fetch, 0)
		FROM pg_stat_user_tables WHERE relid = ('outbox.' || outbox.topic_table($1))::regclass`, topic).Scan(&c.updates, &c.seqScans, &c.touched))
	return c
}

// reads counts the scans of the test topic's table.
func (b testBundle) reads(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, b.db.SQL.QueryRowContext(b.ctx, `SELECT seq_scan + COALESCE(idx_scan, 0)
		FROM pg_stat_user_tables WHERE relid = ('outbox.' || outbox.topic_table($1))::regclass`, topic).Scan(&n))
	return n
}

// topicTable is the name of the test topic's table.
func topicTable(tb testing.TB, b testBundle) string {
	tb.Helper()
	var name string
	require.NoError(tb, b.db.SQL.QueryRowContext(b.ctx, `SELECT outbox.topic_table($1)`, topic).Scan(&name))
	return name
}
