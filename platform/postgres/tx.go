package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Tx is the one kind of transaction an adapter sees: one database
// transaction, open to GORM (GORM) and to literal SQL (ExecContext,
// QueryContext) alike. InTx makes one; Autocommit makes the other kind a
// one-statement change needs, where the statement is its transaction. Both
// always stand; the zero Tx is not in a transaction (Valid) and runs
// nothing.
type Tx struct {
	gorm *gorm.DB
	sql  conn
	// autocommit: each statement is a transaction of its own (Autocommit).
	autocommit bool
}

// conn runs Tx's literal statements: a *sql.Tx, or the pool (Autocommit).
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// errNoTx is the error of the zero Tx.
var errNoTx = errors.New("postgres: not in a transaction (a Tx comes from InTx or Autocommit)")

// Valid reports whether tx is a transaction InTx began or Autocommit made.
func (tx Tx) Valid() bool { return tx.sql != nil && tx.gorm != nil }

// Autocommit reports whether each statement tx runs is a transaction of its
// own (Autocommit): a change of more than one statement must not run on it.
func (tx Tx) Autocommit() bool { return tx.autocommit }

// GORM is the GORM session bound to the transaction.
func (tx Tx) GORM() *gorm.DB { return tx.gorm }

// ExecContext runs a statement in the transaction; args may be one
// pgx.NamedArgs.
func (tx Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	observe(ctx, query, args)
	if !tx.Valid() {
		return nil, errNoTx
	}
	return tx.sql.ExecContext(ctx, query, args...)
}

// QueryContext runs a statement that returns rows in the transaction; args
// may be one pgx.NamedArgs.
func (tx Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	observe(ctx, query, args)
	if !tx.Valid() {
		return nil, errNoTx
	}
	return tx.sql.QueryContext(ctx, query, args...)
}

// InTx runs fn inside one transaction: it commits when fn returns nil and
// rolls back when fn returns an error or panics.
func InTx(ctx context.Context, db *gorm.DB, fn func(tx Tx) error) error {
	return db.WithContext(ctx).Transaction(func(gtx *gorm.DB) error {
		sqlTx, err := sqlTxOf(gtx)
		if err != nil {
			return err
		}
		return fn(Tx{gorm: gtx, sql: sqlTx})
	})
}

// Autocommit is db's pool as a Tx for a change that is one statement: that
// statement is its own transaction (PostgreSQL's autocommit), one round trip
// where InTx takes three (BEGIN, the statement, COMMIT). Two statements on
// it are two transactions, so only a change that is one statement takes
// it: the purchase insert, the API's hottest write, whose events are in
// that statement (ADR 0004), or outbox.Publisher.Write, one statement
// whatever its topics. Nothing refuses a second statement; the caller
// keeps to one.
func Autocommit(db *gorm.DB) (Tx, error) {
	pool, err := db.DB()
	if err != nil {
		return Tx{}, fmt.Errorf("postgres: autocommit: %w", err)
	}
	return Tx{gorm: db, sql: pool, autocommit: true}, nil
}

// GORMOn opens GORM on a database/sql pool that another part of the
// program holds (an operator's command has only the pool), so InTx can
// run on it. It adds no connection and no statement cache of its own.
func GORMOn(db *sql.DB) (*gorm.DB, error) {
	g, err := gorm.Open(gormpostgres.New(gormpostgres.Config{Conn: db}), &gorm.Config{
		DisableAutomaticPing: true,
		NowFunc:              func() time.Time { return time.Now().UTC() },
		Logger:               NewLogger(slog.Default(), slowQuery),
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: GORM on a pool: %w", err)
	}
	return g, nil
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

// sqlTxOf returns the *sql.Tx that gtx is bound to. It fails, rather than
// falling back to another connection, when gtx is not inside a
// transaction: a write outside it would break a change's atomicity.
func sqlTxOf(gtx *gorm.DB) (*sql.Tx, error) {
	switch pool := gtx.Statement.ConnPool.(type) {
	case *sql.Tx:
		return pool, nil
	case *gorm.PreparedStmtTX:
		// With PrepareStmt GORM wraps the transaction; the *sql.Tx inside is
		// the same transaction, without GORM's statement cache.
		if sqlTx, ok := pool.Tx.(*sql.Tx); ok {
			return sqlTx, nil
		}
		return nil, fmt.Errorf("postgres: prepared-statement transaction wraps %T, not *sql.Tx", pool.Tx)
	default:
		return nil, fmt.Errorf("postgres: the GORM session is not in a transaction (connection pool is %T)", pool)
	}
}

// StatementObserver sees each statement a Tx runs under a context from
// WithStatementObserver, before it runs.
type StatementObserver func(query string, args []any)

type statementObserverKey struct{}

// WithStatementObserver returns ctx with fn seeing the statements Tx runs
// under it: the plan guards explain exactly what the code sends, through
// the code's own repositories, without a second copy of its statements.
func WithStatementObserver(ctx context.Context, fn StatementObserver) context.Context {
	return context.WithValue(ctx, statementObserverKey{}, fn)
}

func observe(ctx context.Context, query string, args []any) {
	if fn, ok := ctx.Value(statementObserverKey{}).(StatementObserver); ok {
		fn(query, args)
	}
}
