package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// planTopic is the promotion topic, whose table the migrations made.
const planTopic = "pin.promotion.purchase-changed.v1"

// relaySession is how the relay's sessions plan (PlanAsTheRelay), for the
// plan guard's transaction only.
var relaySession = []testbed.Statement{{Query: relayPlanning, Args: []any{true}}}

// TestRelayStatementsPlanWithoutJIT is the relay's plan guard (ADR 0013):
// on an outbox holding what 10k, 100k and 1M purchases' events leave (all
// but one batch acknowledged, each row as wide as an event, so the table
// has the pages the planner sees in production), first never analyzed
// (after a restore or a pg_upgrade), then analyzed, the relay's read walks
// the topic's unacknowledged index in order (leaving the held keys' rows
// through an index probe of the dead letters), never the primary key, and
// its acknowledgement finds the rows by offset, without JIT, on a session
// with the service's and the relay session's settings (testbed opens it with
// postgres.Open; relaySession). The generic plan is the one the relay runs
// (it prepares both once per session and makes their plans again every
// second, ForgetPlans), so it is wanted too, from an empty new table (the
// first plan of a new deployment) up. Without relaySession, a
// never-analyzed table under about 80k rows is taken for fewer waiting rows
// than a batch (the topic's selectivity is a guess) and the read gathers its
// whole backlog as a bitmap and sorts it.
func TestRelayStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	read := testbed.Statement{Setup: relaySession, Query: readBatchQuery, Args: []any{planTopic, 1_000_000, 200}}
	for _, size := range append([]int{0}, testbed.PlanSizes()...) {
		t.Run("events="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			_, err := db.SQL.ExecContext(context.Background(), `INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked)
				SELECT $2, gen_random_uuid()::text, json_build_object('event', repeat('x', 600)), '{}', i <= $1 - 200
				FROM generate_series(1, $1) AS i`, size, planTopic)
			require.NoError(t, err)
			offsets := make([]int64, 200)
			for i := range offsets {
				offsets[i] = int64(max(size-200, 0) + 1 + i)
			}
			ack := testbed.Statement{Setup: relaySession, Query: ackQuery, Args: []any{planTopic, offsets}}
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, db.SQL, Messages)
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
						if size == 0 && stats == "analyzed" && s.ordered {
							// Nothing to read: the primary key costs the same as
							// the unacknowledged index, and may be taken, for at
							// most a second (ForgetPlans).
							continue
						}
						custom, generic := testbed.Explain(t, db.SQL, s.q)
						for _, p := range []testbed.Plan{custom, generic} {
							t.Logf("%s: %s", s.name, p)
							testbed.CheckPlan(t, s.name, p, testbed.PlanWant{Index: s.index, InOrder: s.ordered})
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

// TestRelayReadOnABacklogAnalyzedWhileItWaited is the relay's plan guard
// for a topic analyzed while every row of it waited (a backlog built up
// while the relay was away, on a table the retention had emptied; or the
// relay's benchmark): the statistics then say the unacknowledged index and
// the primary key hold the same rows, and the read, which checks acked on
// the heap through either, costs the same through both but for their sizes.
// The unacknowledged index is packed (migration 00014) and so the smaller:
// from a few pages up the read walks it, before the relay's first batch is
// acknowledged and after, without JIT, in the relay session's settings, as
// custom and generic plan. Below that, both indexes are a page or two and
// the planner may take the primary key until the first batch's
// acknowledgement makes it the larger: such a plan walks at most those
// pages, for at most a second (ForgetPlans). With the index as 00012 left
// it (pages 90 % full), the read walked the primary key at 2,000 and
// 20,000 waiting rows, and every row acknowledged since, until the relay
// planned again.
func TestRelayReadOnABacklogAnalyzedWhileItWaited(t *testing.T) {
	t.Parallel()
	read := testbed.Statement{Setup: relaySession, Query: readBatchQuery, Args: []any{planTopic, 1_000_000, 200}}
	for _, size := range []int{200, 2_000, 20_000} {
		t.Run("waiting="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			_, err := db.SQL.ExecContext(context.Background(), `INSERT INTO outbox.messages (topic, uuid, payload, metadata)
				SELECT $2, gen_random_uuid()::text, json_build_object('event', repeat('x', 600)), '{}'
				FROM generate_series(1, $1) AS i`, size, planTopic)
			require.NoError(t, err)
			testbed.Analyze(t, db.SQL, Messages)
			for _, acked := range []int{0, 100} {
				_, err := db.SQL.ExecContext(context.Background(),
					`UPDATE outbox.messages SET acked = true WHERE topic = $1 AND "offset" <= $2`, planTopic, acked)
				require.NoError(t, err)
				t.Run("acknowledged="+testbed.SizeName(acked), func(t *testing.T) {
					if size < 2_000 && acked == 0 {
						t.Skip("a page or two each: the primary key may be taken, and walks them for at most a second")
					}
					custom, generic := testbed.Explain(t, db.SQL, read)
					for _, p := range []testbed.Plan{custom, generic} {
						t.Logf("relay read: %s", p)
						testbed.CheckPlan(t, "relay read", p, testbed.PlanWant{
							Index: "pin_promotion_purchase_changed_v1_unacked_idx", InOrder: true})
						if p.UsesIndex("pin_promotion_purchase_changed_v1_pkey") {
							t.Errorf("relay read: walks the primary key, every acknowledged row: %s", p)
						}
					}
				})
			}
		})
	}
}

// TestRetentionDeletePlanWithoutJIT is the retention's plan guard: on an
// outbox of acknowledged rows written over two weeks (half of them older
// than the week the retention keeps), never analyzed, then analyzed, the
// delete finds its oldest rows through the acknowledged rows' index in
// order of age and deletes them by key, without reading the topic's table
// whole, and without JIT. It is planned at each run (planNow), in order
// (planInOrder): the custom plan is the one that runs, the generic one is
// checked as well. Without planInOrder, never analyzed at 10k and 100k, a
// batch gathered every expired row as a bitmap and sorted them.
func TestRetentionDeletePlanWithoutJIT(t *testing.T) {
	t.Parallel()
	week := (7 * 24 * time.Hour).Seconds()
	del := testbed.Statement{Setup: []testbed.Statement{{Query: planInOrder, Args: []any{true}}},
		Query: deleteAckedQuery, Args: []any{planTopic, week, 500}}
	for _, size := range testbed.PlanSizes() {
		t.Run("events="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			_, err := db.SQL.ExecContext(context.Background(), `INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked, created_at)
				SELECT $2, gen_random_uuid()::text, json_build_object('event', repeat('x', 600)), '{}', i <= $1 - 200,
					now() - make_interval(secs => 14 * 86400.0 * ($1 - i) / $1)
				FROM generate_series(1, $1) AS i`, size, planTopic)
			require.NoError(t, err)
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, db.SQL, Messages)
				}
				t.Run("stats="+stats, func(t *testing.T) {
					custom, generic := testbed.Explain(t, db.SQL, del)
					for _, p := range []testbed.Plan{custom, generic} {
						t.Logf("retention delete: %s", p)
						testbed.CheckPlan(t, "retention delete", p, testbed.PlanWant{
							Index: "pin_promotion_purchase_changed_v1_acked_created_at_idx", InOrder: true})
					}
				})
			}
		})
	}
}
