package testbed

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TableStats are the cumulative row counters of one table
// (pg_stat_user_tables), as far as PostgreSQL has flushed them.
type TableStats struct {
	Updates    int64 // n_tup_upd
	HOTUpdates int64 // n_tup_hot_upd
	DeadTuples int64 // n_dead_tup
}

// HOTRatio is the share of the updates that were heap-only (HOT).
func (s TableStats) HOTRatio() float64 {
	if s.Updates == 0 {
		return 0
	}
	return float64(s.HOTUpdates) / float64(s.Updates)
}

// ReadTableStats flushes the counters of one session of pool and reads
// table's. Backends flush on their own only now and then (PG 15 and later),
// so a test whose writes all went through that one session limits pool to a
// single connection (SetMaxOpenConns(1)) before it writes.
func ReadTableStats(tb testing.TB, pool *sql.DB, table string) TableStats {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pool.Conn(ctx)
	if err != nil {
		tb.Fatalf("testbed: table stats: %v", err)
	}
	defer func() { _ = conn.Close() }()
	// The flush happens when the session goes idle after this statement.
	if _, err := conn.ExecContext(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		tb.Fatalf("testbed: table stats: %v", err)
	}
	var s TableStats
	err = conn.QueryRowContext(ctx, `SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup
		FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(&s.Updates, &s.HOTUpdates, &s.DeadTuples)
	if err != nil {
		tb.Fatalf("testbed: table stats of %s: %v", table, err)
	}
	return s
}
