package postgres

import (
	"context"
	"database/sql"
	"fmt"
)

// Querier runs literal statements: a *sql.DB, or the *sql.Tx InSnapshot
// hands over, so that a reader works the same in a snapshot or outside one.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// InSnapshot runs fn in one read-only REPEATABLE READ transaction: every
// statement fn runs sees the same committed state and the same now(), so
// figures read by separate statements (a backlog's count and its oldest
// row) agree. It only reads; it is rolled back when fn returns.
func InSnapshot(ctx context.Context, db *sql.DB, fn func(q Querier) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("postgres: begin a snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}
