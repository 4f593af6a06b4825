package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestApplyStatementsPlanWithoutJIT is the consumer's plan guard (ADR
// 0013): with the inbox and the version rows of 10k, 100k and 1M purchases,
// never analyzed, then analyzed, the inbox and version guard and the
// version record of a batch of 200 plan without JIT, and from 100k read no
// table whole and find the rows by key (10k version rows are a hundred
// pages, which the planner may rightly read rather than probe 200 times), on
// a session with the service's settings.
func TestApplyStatementsPlanWithoutJIT(t *testing.T) {
	t.Parallel()
	const consumer = "plan-guard"
	for _, size := range testbed.PlanSizes() {
		t.Run("purchases="+testbed.SizeName(size), func(t *testing.T) {
			db := testbed.NewDatabase(t)
			ctx := context.Background()
			for _, q := range []string{
				`INSERT INTO consumer.inbox (consumer, message_id) SELECT $1, gen_random_uuid() FROM generate_series(1, $2)`,
				`INSERT INTO consumer.aggregate_versions (consumer, aggregate_id, version)
				SELECT $1, md5(i::text)::uuid::text, 2 FROM generate_series(1, $2) AS i`,
			} {
				_, err := db.SQL.ExecContext(ctx, q, consumer, size)
				require.NoError(t, err)
			}
			messages, aggregates, versions := make([]string, 200), make([]string, 200), make([]int64, 200)
			for i := range messages {
				messages[i], versions[i] = uuid.NewString(), 3
				aggregates[i] = uuid.NewMD5(uuid.Nil, fmt.Append(nil, i)).String()
			}
			for _, stats := range []string{"none", "analyzed"} {
				if stats == "analyzed" {
					testbed.Analyze(t, db.SQL, "consumer.inbox", "consumer.aggregate_versions")
				}
				t.Run("stats="+stats, func(t *testing.T) {
					for _, s := range []struct {
						name  string
						s     testbed.Statement
						index string
					}{
						{"inbox and version guard", testbed.Statement{Query: guardQuery, Args: []any{messages, aggregates, consumer}}, ""},
						{"version record", testbed.Statement{Query: recordVersionsQuery, Args: []any{aggregates, versions, consumer}}, "aggregate_versions_pkey"},
					} {
						custom, generic := testbed.Explain(t, db.SQL, s.s)
						for _, p := range []testbed.Plan{custom, generic} {
							t.Logf("%s: %s", s.name, p)
							want := testbed.PlanWant{Index: s.index}
							if size < 100_000 { // a table of a hundred pages may rightly be read whole
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
