package expirebench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// explainDirEnv names a directory; when set, BenchmarkExpireBatch writes
// the plans of the batch's statements there for each table size
// (scripts/bench.sh sets it to the run's .bench/ folder).
const explainDirEnv = "PIN_BENCH_EXPLAIN_DIR"

// moduleSelection is the module's selection of a batch as GORM sends it
// (the due CTE of adapters.selectBatchQuery, alone, without the poison).
const moduleSelection = `SELECT "id","tenant_id","package_id","package_code","package_kind","boost_weight",
	"price_amount","currency_id","currency_iso_code","currency_name","currency_sign","status","payment_status",
	"starts_at","ends_at","cancel_reason","created_by_user_id","updated_by_user_id","created_at","updated_at","version"
FROM "promotion"."promotion_purchases"
WHERE promotion.expiry_due(promotion_purchases, $1) ORDER BY ends_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`

// writePlans writes EXPLAIN (ANALYZE, BUFFERS) of the bound and of the
// module's selection on f's table to path. Each runs in a transaction that
// is rolled back, so the table is left as it was.
func writePlans(tb testing.TB, f *fixture, path string) {
	tb.Helper()
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	var out strings.Builder
	fmt.Fprintf(&out, "Plans on %d purchases (%d due), %s\n", f.total, f.due, asOf.Format(time.RFC3339))
	for _, q := range []struct {
		name, sql string
		args      []any
	}{
		{"bound (BoundSQL)", BoundSQL, []any{asOf, batchSize, uuid.NewString(), benchTraceparent}},
		{"module: selection of the batch (due CTE of adapters.selectBatchQuery)", moduleSelection, []any{asOf, batchSize}},
	} {
		fmt.Fprintf(&out, "\n== %s\n%s\n", q.name, explain(tb, f, q.sql, q.args...))
	}
	require.NoError(tb, os.WriteFile(path, []byte(out.String()), 0o644))
}

// explain returns the EXPLAIN (ANALYZE, BUFFERS) of query, run in a
// transaction that is rolled back.
func explain(tb testing.TB, f *fixture, query string, args ...any) string {
	tb.Helper()
	ctx := context.Background()
	tx, err := f.db.SQL.BeginTx(ctx, nil)
	require.NoError(tb, err)
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
	require.NoError(tb, err)
	defer func() { _ = rows.Close() }()
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(tb, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(tb, rows.Err())
	return strings.Join(lines, "\n")
}
