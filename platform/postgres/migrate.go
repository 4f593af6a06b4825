package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/pinmarket/pin/migrations"
)

// MigrationProvider returns a goose provider over the embedded migrations
// (package migrations) for db. It takes a PostgreSQL session advisory lock
// around up and down, so several processes may migrate the same database at
// once: one applies, the others wait and find nothing left to do.
func MigrationProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(
		// Retry every second for up to five minutes: the lock is held only
		// while another process applies migrations.
		lock.WithLockTimeout(1, 300),
	)
	if err != nil {
		return nil, fmt.Errorf("postgres: migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration. It is idempotent.
func Migrate(ctx context.Context, db *sql.DB) error {
	p, err := MigrationProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate up: %w", err)
	}
	return nil
}

// Reason codes of NotReadyError: what /readyz tells anyone who asks.
const (
	ReasonUnreachable       = "database_unreachable"
	ReasonMigrationsPending = "migrations_pending"
	// ReasonReadOnly: the database answers but refuses writes (ADR 0021).
	ReasonReadOnly = "database_read_only"
)

// NotReadyError says why the database cannot serve traffic: Reason is a
// short code safe to show strangers; Err, which may name hosts and users,
// is for the log only.
type NotReadyError struct {
	Reason string
	Err    error
}

func (e *NotReadyError) Error() string { return "postgres: " + e.Reason + ": " + e.Err.Error() }

func (e *NotReadyError) Unwrap() error { return e.Err }

// ReadyReason returns the short code GET /readyz answers with.
func (e *NotReadyError) ReadyReason() string { return e.Reason }

// Ready reports whether the database is reachable, takes writes and has no
// pending migration; it backs GET /readyz. Its errors are *NotReadyError.
func Ready(ctx context.Context, db *sql.DB) error {
	if err := writable(ctx, db); err != nil {
		if IsReadOnly(err) {
			return &NotReadyError{ReasonReadOnly, err}
		}
		return &NotReadyError{ReasonUnreachable, err}
	}
	p, err := MigrationProvider(db)
	if err != nil {
		return &NotReadyError{ReasonMigrationsPending, err}
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		// A database that answers a ping but not a query is, to a
		// caller, unreachable.
		return &NotReadyError{ReasonUnreachable, fmt.Errorf("migration status: %w", err)}
	}
	if pending {
		return &NotReadyError{ReasonMigrationsPending, errors.New("migrations are pending")}
	}
	return nil
}

// writable fails with pgconn.ErrReadOnlyConnection when a session of db is
// read-only, and drops that session: the next probe gets a new one, which
// target_session_attrs=read-write takes to a writable host, if any.
func writable(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	var readOnly string
	if err := conn.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return err
	}
	if readOnly != "on" {
		return nil
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	return fmt.Errorf("the session is read-only: %w", pgconn.ErrReadOnlyConnection)
}

// EnsureDatabase creates the database named in url when it does not exist
// yet, connecting to the "postgres" maintenance database of the same server
// with the same credentials. It is safe to call from several processes at
// once. `pin dev` uses it so that a bare PostgreSQL is enough.
func EnsureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("postgres: parse database URL: %w", err)
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	maint := cfg.Copy()
	maint.Database = "postgres"
	db := stdlib.OpenDB(*maint)
	defer db.Close()

	var exists bool
	err = db.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
	if err != nil {
		return fmt.Errorf("postgres: ensure database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = db.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && !isDuplicateDatabase(err) {
		return fmt.Errorf("postgres: create database %s: %w", name, err)
	}
	return nil
}

// isDuplicateDatabase reports whether err says that a concurrent CREATE
// DATABASE won the race.
func isDuplicateDatabase(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	// 42P04 duplicate_database; 23505 when both inserts reach pg_database's
	// unique index at the same moment.
	return pgErr.Code == "42P04" || pgErr.Code == "23505"
}
