//go:build !production

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// devMarker is the comment `pin dev` puts on its database; `pin dev
// make-due` refuses any database without it, so it never reaches production.
const devMarker = "pin dev"

// markDevDatabase comments the current database as one `pin dev` owns.
func markDevDatabase(ctx context.Context, db *sql.DB) error {
	var name string
	if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		return fmt.Errorf("dev: mark database: %w", err)
	}
	_, err := db.ExecContext(ctx, `COMMENT ON DATABASE `+pgx.Identifier{name}.Sanitize()+` IS '`+devMarker+`'`)
	if err != nil {
		return fmt.Errorf("dev: mark database %s: %w", name, err)
	}
	return nil
}

// makeDue runs `pin dev make-due PURCHASE_ID`: it moves an Active purchase's
// starts_at and ends_at into the past together (the period keeps its length,
// as the schema allows for black-box tests), so the next expiry cycle, or
// `pin expire-promotions --once`, expires it.
func makeDue(ctx context.Context, args, environ []string, stdout io.Writer) error {
	const synopsis = "dev make-due PURCHASE_ID   (only on a database pin dev created)"
	fs := newFlags("dev make-due")
	if err := parseFlags(fs, synopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"dev make-due: want exactly one PURCHASE_ID"}
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return usageError{fmt.Sprintf("dev make-due: %q is not a UUID", fs.Arg(0))}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()

	var marker sql.NullString
	err = db.QueryRowContext(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()`).Scan(&marker)
	if err != nil {
		return fmt.Errorf("dev make-due: read the database's marker: %w", err)
	}
	if marker.String != devMarker {
		return errors.New("dev make-due: refused: PIN_DATABASE_URL is not a database pin dev created (it carries no 'pin dev' comment)")
	}
	var endsAt sql.NullTime
	err = db.QueryRowContext(ctx, `
		UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - (ends_at - now()) - interval '1 second',
		    ends_at = now() - interval '1 second'
		WHERE id = $1 AND status = 'Active' AND ends_at > now()
		RETURNING ends_at`, id).Scan(&endsAt)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("dev make-due: no Active purchase %s that is not due yet", id)
	}
	if err != nil {
		return fmt.Errorf("dev make-due: %w", err)
	}
	fmt.Fprintf(stdout, "purchase %s is due (ends_at %s): the next expiry cycle of pin dev (PIN_EXPIRE_INTERVAL) or pin expire-promotions --once expires it\n",
		id, endsAt.Time.UTC().Format("2006-01-02T15:04:05Z"))
	return nil
}
