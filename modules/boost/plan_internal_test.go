package boost

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestProjectionStatementsPlanWithoutJIT is the boost projection's plan
// guard (ADR 0013): with the contributions of 10k, 100k and 1M purchases
// (two targets each), never analyzed, then analyzed, the statements that
// apply a batch of 200 purchases plan without JIT, and from 100k read no
// table whole and find the rows by key (10k contributions are a few hundred
// pages, which the planner may rightly read rather than probe 200 times),
// on a session with the service's settings.
func TestProjectionStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	for _, size := range testbed.PlanSizes() {
		t.Run("purchases="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			ctx := context.Background()
			for _, q := range []string{
				`INSERT INTO boost.purchase_targets (purchase_id, target_kind, target_id, boost_weight)
				SELECT md5('p' || i)::uuid, 'Project', md5('t' || (i * 2 + k) % $1)::uuid, 10
				FROM generate_series(1, $1) AS i, generate_series(0, 1) AS k`,
				`INSERT INTO boost.target_boosts (target_kind, target_id, boost_weight, active_purchases)
				SELECT 'Project', md5('t' || i)::uuid, 20, 2 FROM generate_series(0, $1 - 1) AS i`,
			} {
				_, err := db.SQL.ExecContext(ctx, q, size)
				require.NoError(t, err)
			}
			var rows []contribution
			var purchases []uuid.UUID
			var keys []targetKey
			for range 200 {
				p := uuid.New()
				purchases = append(purchases, p)
				target := uuid.New()
				rows = append(rows, contribution{PurchaseID: p, TargetKind: "Project", TargetID: target, BoostWeight: 10})
				keys = append(keys, targetKey{TargetKind: "Project", TargetID: target})
			}
			js := func(v any) string { b, err := json.Marshal(v); require.NoError(t, err); return string(b) }
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, db.SQL, "boost.purchase_targets", "boost.target_boosts")
				}
				t.Run("stats="+stats, func(t *testing.T) {
					for _, s := range []struct {
						name, query, arg, index string
					}{
						{"add", addContributionsQuery, js(rows), ""},
						{"remove", removeContributionsQuery, js(purchases), "purchase_targets_pkey"},
						{"delete emptied", deleteEmptiedQuery, js(keys), "target_boosts_pkey"},
					} {
						// GORM's one ? is PostgreSQL's $1.
						query := strings.Replace(s.query, "?", "$1", 1)
						custom, generic := testbed.Explain(t, db.SQL, testbed.Statement{Query: query, Args: []any{s.arg}})
						for _, p := range []testbed.Plan{custom, generic} {
							t.Logf("%s: %s", s.name, p)
							want := testbed.PlanWant{Index: s.index}
							if size < 100_000 { // a table of a few hundred pages may rightly be read whole
								want = testbed.PlanWant{NoSeqScan: []string{}}
							}
							testbed.CheckPlan(t, s.name, p, want)
						}
					}
				})
			}
		})
	}
}
