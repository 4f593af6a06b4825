package postgres

import (
	"context"
	"database/sql"
	"fmt"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"gorm.io/gorm"
)

// Tx is one database transaction seen two ways: as a GORM session for the
// use case's reads and writes, and as the executor that watermill-sql needs
// to insert outbox messages into the very same transaction.
type Tx struct {
	// DB is the GORM session bound to the transaction.
	DB *gorm.DB
	// Exec runs statements on the same transaction, for watermill-sql.
	Exec watermillsql.ContextExecutor
}

// InTx runs fn inside one transaction: it commits when fn returns nil and
// rolls back when fn returns an error or panics.
func InTx(ctx context.Context, db *gorm.DB, fn func(tx Tx) error) error {
	return db.WithContext(ctx).Transaction(func(gtx *gorm.DB) error {
		exec, err := ExecutorOf(gtx)
		if err != nil {
			return err
		}
		return fn(Tx{DB: gtx, Exec: exec})
	})
}

// InSQLTx is InTx on a database/sql pool, for the code that holds no GORM
// session (the operator commands). fn's errors come back as they are; a
// failed begin or commit is wrapped with what, the operation's name.
func InSQLTx(ctx context.Context, db *sql.DB, what string, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() { _ = tx.Rollback() }() // after a commit, a no-op
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// ExecutorOf returns the watermill-sql executor of the transaction that gtx
// is bound to. It fails, rather than falling back to another connection, when
// gtx is not inside a transaction: an outbox write outside the caller's
// transaction would break the atomicity of a change and its event.
func ExecutorOf(gtx *gorm.DB) (watermillsql.ContextExecutor, error) {
	switch pool := gtx.Statement.ConnPool.(type) {
	case *sql.Tx:
		return watermillsql.TxFromStdSQL(pool), nil
	case *gorm.PreparedStmtTX:
		// With PrepareStmt GORM wraps the transaction; the *sql.Tx inside is
		// the same transaction, without GORM's statement cache.
		if sqlTx, ok := pool.Tx.(*sql.Tx); ok {
			return watermillsql.TxFromStdSQL(sqlTx), nil
		}
		return nil, fmt.Errorf("postgres: prepared-statement transaction wraps %T, not *sql.Tx", pool.Tx)
	default:
		return nil, fmt.Errorf("postgres: the GORM session is not in a transaction (connection pool is %T)", pool)
	}
}
