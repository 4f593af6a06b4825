package outbox_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
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

// TestRelayStatementsPlanWithoutJIT is the relay's plan guard (ADR 0013):
// on an outbox holding what 10k, 100k and 1M purchases' events leave (all
// but one batch acknowledged, each row as wide as an event, so the table
// has the pages the planner sees in production), first never analyzed
// (after a restore or a pg_upgrade), then analyzed, the relay's read walks
// the topic's unacknowledged index in order (leaving the held keys' rows
// through an index probe of the dead letters), never the primary key, and
// its acknowledgement finds the rows by offset, without JIT, on a session
// with the service's settings (testbed opens it with postgres.Open). One
// exception: never analyzed, a table under about 80k rows is taken for
// fewer unacknowledged rows than a batch (the topic's selectivity is a
// guess), and the read gathers them from the same index and sorts them:
// the backlog only, never an acknowledged row (ADR 0024).
func TestRelayStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	read := testbed.Statement{Query: store.ReadBatchQuery, Args: []any{topic, 1_000_000, 200}}
	for _, size := range testbed.PlanSizes() {
		t.Run("events="+testbed.SizeName(size), func(t *testing.T) {
			b := setup(t)
			_, err := b.db.SQL.ExecContext(b.ctx, `INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked)
				SELECT $2, gen_random_uuid()::text, json_build_object('event', repeat('x', 600)), '{}', i <= $1 - 200
				FROM generate_series(1, $1) AS i`, size, topic)
			require.NoError(t, err)
			offsets := make([]int64, 200)
			for i := range offsets {
				offsets[i] = int64(size - 200 + 1 + i)
			}
			ack := testbed.Statement{Query: store.AckQuery, Args: []any{topic, offsets}}
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, b.db.SQL, outbox.MessagesTable)
				}
				t.Run("stats="+stats, func(t *testing.T) {
					for _, s := range []struct {
						name    string
						q       testbed.Statement
						index   string
						ordered bool
					}{
						{"relay read", read, "pin_promotion_purchase_changed_v1_unacked_idx", true},
						{"relay ack", ack, "pin_promotion_purchase_changed_v1_pkey", false},
						{"relay read, the held keys probed", read, "dead_letters_held_keys_idx", false},
					} {
						custom, generic := testbed.Explain(t, b.db.SQL, s.q)
						for _, p := range []testbed.Plan{custom, generic} {
							t.Logf("%s: %s", s.name, p)
							ordered := s.ordered && (stats == "analyzed" || size >= 100_000)
							testbed.CheckPlan(t, s.name, p, testbed.PlanWant{Index: s.index, InOrder: ordered})
							if s.ordered && p.UsesIndex("pin_promotion_purchase_changed_v1_pkey") {
								t.Errorf("%s: walks the primary key, every acknowledged row: %s", s.name, p)
							}
						}
					}
				})
			}
		})
	}
}
