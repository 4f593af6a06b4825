package outbox_test

import (
	"fmt"
	"testing"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox"
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
	b.startRelay(t, outbox.RelayConfig{Brokers: brokers}, nil)

	// The relay reads, and acknowledges, while the outbox is nearly empty.
	b.publish(t, event("k", 1))
	waitFor(t, "the first message to be acknowledged", func() bool { n, _, _ := b.stats(t); return n == 0 })

	// Then the outbox holds what a week of traffic leaves acknowledged.
	const kept = 20000
	_, err := b.db.SQL.ExecContext(b.ctx, `INSERT INTO `+outbox.TableName(topic)+` (uuid, payload, metadata, acked)
		SELECT gen_random_uuid()::text, '{}', '{}', true FROM generate_series(1, $1)`, kept)
	require.NoError(t, err)
	_, err = b.db.SQL.ExecContext(b.ctx, `SELECT pg_stat_reset_single_table_counters($1::regclass)`, outbox.TableName(topic))
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
			FROM pg_stat_user_tables WHERE relid = $1::regclass`, outbox.TableName(topic)).Scan(&scans, &seqScans, &seqRead)
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
// has the pages the planner sees in production), first never analyzed (after a restore or a
// pg_upgrade), then analyzed, the relay's read walks the unacknowledged
// index in order (leaving the held keys' rows through an index probe of the
// dead letters) and its acknowledgement finds the rows by offset, without
// JIT, on a session with the service's settings (testbed opens it with
// postgres.Open).
func TestRelayStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	table := outbox.TableName(topic)
	read, err := outbox.SchemaAdapter(200).SelectQuery(watermillsql.SelectQueryParams{Topic: topic})
	require.NoError(t, err)
	held := watermillsql.Query{Query: outbox.RelayReadQuery(topic, 200), Args: []any{topic, 1_000_000}}
	for _, size := range testbed.PlanSizes() {
		t.Run("events="+testbed.SizeName(size), func(t *testing.T) {
			b := setup(t)
			_, err := b.db.SQL.ExecContext(b.ctx, `INSERT INTO `+table+` (uuid, payload, metadata, acked)
				SELECT gen_random_uuid()::text, json_build_object('event', repeat('x', 600)), '{}', i <= $1 - 200
				FROM generate_series(1, $1) AS i`, size)
			require.NoError(t, err)
			offsets := make([]watermillsql.Row, 200)
			for i := range offsets {
				offsets[i].Offset = int64(size - 200 + 1 + i)
			}
			ack, err := outbox.OffsetsAdapter().AckMessageQuery(watermillsql.AckMessageQueryParams{Topic: topic, Rows: offsets})
			require.NoError(t, err)
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, b.db.SQL, table)
				}
				t.Run("stats="+stats, func(t *testing.T) {
					for _, s := range []struct {
						name    string
						q       watermillsql.Query
						index   string
						ordered bool
					}{
						{"relay read", read, "pin_promotion_purchase_changed_v1_unacked_idx", true},
						{"relay ack", ack, "pin_promotion_purchase_changed_v1_pkey", false},
						{"relay read, held keys left", held, "pin_promotion_purchase_changed_v1_unacked_idx", true},
						{"relay read, the held keys probed", held, "dead_letters_held_keys_idx", false},
					} {
						custom, generic := testbed.Explain(t, b.db.SQL, testbed.Statement{Query: s.q.Query, Args: s.q.Args})
						for _, p := range []testbed.Plan{custom, generic} {
							t.Logf("%s: %s", s.name, p)
							testbed.CheckPlan(t, s.name, p, testbed.PlanWant{Index: s.index, InOrder: s.ordered})
						}
					}
				})
			}
		})
	}
}
