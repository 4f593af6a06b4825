package adapters

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
)

// The selection's skipped-locked count reads only the window the batch
// scanned: its bound, the batch's last row, is an index condition of the
// count's scan, so a backlog far larger than the batch costs the count
// nothing (docs/performance.md, "the selection's skipped count"). With the
// bound as a filter, the scan ran to the end of the due range.
func TestExpireSkippedCountScansOnlyTheBatchWindow(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	const due, limit = 60, 5
	b.insertDue(t, due)

	tx, err := b.db.SQL.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(b.ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	var plan []byte
	require.NoError(t, tx.QueryRowContext(b.ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+selectBatchQuery,
		pgx.NamedArgs{"as_of": time.Now(), "exclude": []string{}, "batch_limit": limit,
			"poison_retries": expiry.PoisonRetries(limit, 1)}).Scan(&plan))

	var root []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal(plan, &root))
	count := root[0].Plan.find(func(n planNode) bool { return n.Alias == "q" })
	require.NotNil(t, count, "the count's scan of promotion_purchases (alias q)\n%s", plan)
	t.Logf("the count's scan: Index Cond %s; %v rows, %v removed by filter", count.IndexCond, count.ActualRows, count.RowsRemovedByFilter)
	require.Contains(t, count.IndexCond, "ends_at", "the window's bound is an index condition\n%s", plan)
	require.Contains(t, count.IndexCond, "id", "the window's bound is an index condition\n%s", plan)
	require.LessOrEqual(t, count.ActualRows+count.RowsRemovedByFilter, float64(2*limit),
		"the count reads the batch's window, not the %d due rows\n%s", due, plan)
}

// The literal queries read and write the purchase columns in the order
// purchaseColumns lists them (which TestExpirePurchaseColumnsMatchModel holds
// equal to the model), so a new column cannot go missing from one of them.
func TestQueriesListPurchaseColumns(t *testing.T) {
	t.Parallel()
	for name, q := range map[string]struct {
		query    string
		prefixes []string
	}{
		"expire_select_batch": {selectBatchQuery, []string{"", "p."}},
		"purchase_insert":     {insertPurchaseQuery, []string{""}},
		"snapshot_select":     {snapshotSelectBatchQuery, []string{"p."}},
	} {
		flat := strings.Join(strings.Fields(q.query), " ")
		for _, prefix := range q.prefixes {
			require.Contains(t, flat, columnList(prefix, purchaseColumns), "%s lists purchaseColumns with prefix %q", name, prefix)
		}
	}
}

// columnList is cols joined as a query lists them, each with prefix.
func columnList(prefix string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + c
	}
	return strings.Join(out, ", ")
}

// planNode is a node of EXPLAIN (FORMAT JSON), with what the tests read.
type planNode struct {
	NodeType            string     `json:"Node Type"`
	Alias               string     `json:"Alias"`
	IndexCond           string     `json:"Index Cond"`
	ActualRows          float64    `json:"Actual Rows"`
	RowsRemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans               []planNode `json:"Plans"`
}

// find returns the first node, depth first, that match holds for.
func (n planNode) find(match func(planNode) bool) *planNode {
	if match(n) && strings.Contains(n.NodeType, "Scan") {
		return &n
	}
	for _, c := range n.Plans {
		if found := c.find(match); found != nil {
			return found
		}
	}
	return nil
}
