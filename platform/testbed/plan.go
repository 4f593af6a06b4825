package testbed

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PlanSizes are the purchases a plan guard's tables hold (10k, 100k, 1M),
// the largest left out under -short.
func PlanSizes() []int {
	if testing.Short() {
		return []int{10_000, 100_000}
	}
	return []int{10_000, 100_000, 1_000_000}
}

// SizeName is n as a plan guard's subtest names it: 10k, 1M.
func SizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000 && n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}

// Plan is one plan of EXPLAIN (FORMAT JSON), as a plan guard reads it.
type Plan struct {
	// Generic is set for the plan a prepared statement runs without its
	// parameters' values (plan_cache_mode = force_generic_plan).
	Generic bool
	// Cost is the plan's total estimated cost.
	Cost float64
	// JIT is set when PostgreSQL would compile the plan's expressions
	// (jit on and Cost above jit_above_cost).
	JIT bool
	// Scans are the plan's scans of tables and indexes, depth first.
	Scans []PlanScan
	// JSON is the plan as PostgreSQL printed it, for a failure's message.
	JSON string
}

// PlanScan is one scan node of a plan.
type PlanScan struct {
	Node     string // Seq Scan, Index Scan, Index Only Scan, Bitmap Index Scan…
	Relation string // the table (empty for a bitmap index scan)
	Index    string // the index, if any
}

// UsesIndex reports whether some scan of the plan reads index.
func (p Plan) UsesIndex(index string) bool {
	for _, s := range p.Scans {
		if s.Index == index {
			return true
		}
	}
	return false
}

// ScansIndexInOrder reports whether some Index Scan or Index Only Scan of
// the plan reads index: in the index's order, stopping at a LIMIT, where a
// bitmap scan reads every match and sorts them.
func (p Plan) ScansIndexInOrder(index string) bool {
	for _, s := range p.Scans {
		if s.Index == index && (s.Node == "Index Scan" || s.Node == "Index Only Scan") {
			return true
		}
	}
	return false
}

// SeqScans are the tables the plan reads whole.
func (p Plan) SeqScans() []string {
	var out []string
	for _, s := range p.Scans {
		if s.Node == "Seq Scan" {
			out = append(out, s.Relation)
		}
	}
	return out
}

// String is the plan's kind, cost, JIT and scans, on one line; JSON has
// the rest.
func (p Plan) String() string {
	kind := "custom"
	if p.Generic {
		kind = "generic"
	}
	scans := make([]string, len(p.Scans))
	for i, s := range p.Scans {
		scans[i] = s.Node
		if s.Index != "" {
			scans[i] += " " + s.Index
		}
		if s.Relation != "" {
			scans[i] += " on " + s.Relation
		}
	}
	return fmt.Sprintf("%s plan, cost %.0f, JIT %t; %s", kind, p.Cost, p.JIT, strings.Join(scans, ", "))
}

// Statement is a statement as the code sends it, for Explain.
type Statement struct {
	// Setup are the settings the code makes before it in the same
	// transaction (SET LOCAL, set_config: their Query and Args), made before
	// the EXPLAIN too.
	Setup []Statement
	Query string
	Args  []any
}

// Explain returns the two plans PostgreSQL can make for s on a session of
// pool, with that session's settings (jit, jit_above_cost): the custom plan
// for its arguments, and the generic plan a prepared statement switches to,
// or runs from the start under plan_cache_mode = force_generic_plan.
// Nothing is run: EXPLAIN without ANALYZE, in a transaction rolled back.
func Explain(tb testing.TB, pool *sql.DB, s Statement) (custom, generic Plan) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Conn(ctx)
	if err != nil {
		tb.Fatalf("testbed: explain: %v", err)
	}
	defer func() { _ = conn.Close() }()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatalf("testbed: explain: %v", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range s.Setup {
		if _, err := tx.ExecContext(ctx, q.Query, q.Args...); err != nil {
			tb.Fatalf("testbed: explain: %v\n%s", err, q.Query)
		}
	}
	query, args := s.Query, s.Args
	// Named parameters become $n here, as pgx rewrites them on the way out,
	// so that PREPARE below sees the statement the server gets.
	if len(args) == 1 {
		if named, ok := args[0].(pgx.NamedArgs); ok {
			if query, args, err = named.RewriteQuery(ctx, nil, query, nil); err != nil {
				tb.Fatalf("testbed: explain: %v\n%s", err, s.Query)
			}
		}
	}

	var out string
	if err := tx.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&out); err != nil {
		tb.Fatalf("testbed: explain: %v\n%s", err, query)
	}
	custom = parsePlan(tb, out)

	// The generic plan does not depend on the values, so EXECUTE passes
	// NULLs. Sent as simple queries: the $n are PREPARE's own.
	name := fmt.Sprintf("plan_guard_%d", planGuardSeq.Add(1))
	execute := "EXECUTE " + name
	if n := paramCount(query); n > 0 {
		execute += "(" + strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ") + ")"
	}
	for _, q := range []string{
		`SET LOCAL plan_cache_mode = force_generic_plan`,
		`PREPARE ` + name + ` AS ` + query,
	} {
		if _, err := tx.ExecContext(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			tb.Fatalf("testbed: explain: %v\n%s", err, q)
		}
	}
	if err := tx.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) "+execute,
		pgx.QueryExecModeSimpleProtocol).Scan(&out); err != nil {
		tb.Fatalf("testbed: explain generic: %v\n%s", err, query)
	}
	// PREPARE outlives the rollback, and the session goes back to the pool.
	if _, err := tx.ExecContext(ctx, `DEALLOCATE `+name, pgx.QueryExecModeSimpleProtocol); err != nil {
		tb.Fatalf("testbed: explain: %v", err)
	}
	generic = parsePlan(tb, out)
	generic.Generic = true
	return custom, generic
}

// planGuardSeq names each Explain's prepared statement: one a failed
// Explain left on a pooled session cannot collide with the next.
var planGuardSeq atomic.Int64

var paramRef = regexp.MustCompile(`\$([0-9]+)`)

// paramCount is the highest $n of query.
func paramCount(query string) int {
	n := 0
	for _, m := range paramRef.FindAllStringSubmatch(query, -1) {
		i, _ := strconv.Atoi(m[1])
		n = max(n, i)
	}
	return n
}

// planNode is a node of EXPLAIN (FORMAT JSON), with what Plan reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	TotalCost float64    `json:"Total Cost"`
	Plans     []planNode `json:"Plans"`
}

func parsePlan(tb testing.TB, out string) Plan {
	tb.Helper()
	var root []struct {
		Plan planNode
		JIT  *json.RawMessage `json:"JIT"`
	}
	if err := json.Unmarshal([]byte(out), &root); err != nil || len(root) != 1 {
		tb.Fatalf("testbed: explain: not one plan (%v):\n%s", err, out)
	}
	p := Plan{Cost: root[0].Plan.TotalCost, JIT: root[0].JIT != nil, JSON: out}
	var walk func(n planNode)
	walk = func(n planNode) {
		if strings.Contains(n.NodeType, "Scan") && (n.Relation != "" || n.IndexName != "") {
			p.Scans = append(p.Scans, PlanScan{Node: n.NodeType, Relation: n.Relation, Index: n.IndexName})
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(root[0].Plan)
	return p
}

// Analyze runs ANALYZE on tables, as autovacuum (or an operator after a
// restore) would.
func Analyze(tb testing.TB, pool *sql.DB, tables ...string) {
	tb.Helper()
	if _, err := pool.ExecContext(context.Background(), `ANALYZE `+strings.Join(tables, ", ")); err != nil {
		tb.Fatalf("testbed: analyze: %v", err)
	}
}

// ClearStatistics removes the column statistics ANALYZE gathered for
// tables, leaving their size in pg_class: the state a table is in after a
// pg_upgrade before PostgreSQL 18, or a restore before its first ANALYZE.
// It needs a superuser, as the test server's postgres is.
func ClearStatistics(tb testing.TB, pool *sql.DB, tables ...string) {
	tb.Helper()
	for _, t := range tables {
		if _, err := pool.ExecContext(context.Background(), `DELETE FROM pg_statistic WHERE starelid = $1::regclass`, t); err != nil {
			tb.Fatalf("testbed: clear statistics of %s: %v", t, err)
		}
	}
}

// PlanWant is what a plan guard requires of a hot statement's plan besides
// no JIT.
type PlanWant struct {
	// Index must be read by some scan of the plan (any, when empty).
	Index string
	// InOrder: Index must be read by an Index Scan or Index Only Scan, in
	// its order, not by a bitmap that reads every match.
	InOrder bool
	// NoSeqScan are tables the plan must not read whole; nil: none may be.
	NoSeqScan []string
}

// CheckPlan fails tb (without stopping it) for each way p falls short of
// no JIT and want, naming the statement name.
func CheckPlan(tb testing.TB, name string, p Plan, want PlanWant) {
	tb.Helper()
	if p.JIT {
		tb.Errorf("%s: JIT compiles it: %s", name, p)
	}
	switch {
	case want.Index == "":
	case want.InOrder && !p.ScansIndexInOrder(want.Index):
		tb.Errorf("%s: does not read %s in order: %s", name, want.Index, p)
	case !p.UsesIndex(want.Index):
		tb.Errorf("%s: not through %s: %s", name, want.Index, p)
	}
	for _, table := range p.SeqScans() {
		if want.NoSeqScan == nil || slices.Contains(want.NoSeqScan, table) {
			tb.Errorf("%s: reads %s whole: %s", name, table, p)
		}
	}
}
