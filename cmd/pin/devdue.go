//go:build !production

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/postgres"
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

// makeDueQuery moves the chosen Active purchases that are not due yet into
// the past: starts_at and ends_at together (the period keeps its length, as
// the schema allows for black-box tests), ends_at a second ago. No ids
// means every such purchase, of the tenant when one is named.
const makeDueQuery = `UPDATE promotion.promotion_purchases
	SET starts_at = starts_at - (ends_at - now()) - interval '1 second',
	    ends_at = now() - interval '1 second'
	WHERE status = 'Active' AND ends_at > now()
		AND (cardinality(@ids::uuid[]) = 0 OR id = ANY(@ids::uuid[]))
		AND (@tenant::uuid IS NULL OR tenant_id = @tenant::uuid)
	RETURNING id, ends_at`

// makeDue runs `pin dev make-due [PURCHASE_ID...] [--all-active] [--tenant
// ID]`: it makes the named purchases due, or every Active one (of a tenant),
// in one transaction, so that the next expiry cycle, or `pin
// expire-promotions --once`, expires them. A named purchase that is not an
// Active one still to end (of the tenant) fails the whole command.
func makeDue(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const synopsis = "dev make-due PURCHASE_ID... | --all-active | --tenant ID   (only on a database pin dev created)"
	fs := cli.NewFlags("dev make-due")
	allActive := fs.Bool("all-active", false, "every Active purchase that is not due yet (of --tenant, when given)")
	tenantArg := fs.String("tenant", "", "only purchases of this tenant; alone, every Active one of it")
	named, err := cli.ParseFlagsAmongArgs(fs, synopsis, args, stdout)
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, len(named))
	for i, arg := range named {
		if ids[i], err = uuid.Parse(arg); err != nil {
			return cli.Usagef("dev make-due: %q is not a purchase id (a UUID)", arg)
		}
	}
	var tenant *uuid.UUID
	if *tenantArg != "" {
		t, err := uuid.Parse(*tenantArg)
		if err != nil {
			return cli.Usagef("dev make-due: --tenant %q is not a tenant id (a UUID)", *tenantArg)
		}
		tenant = &t
	}
	switch {
	case *allActive && len(ids) > 0:
		return cli.Usage("dev make-due: name purchase ids or --all-active, not both")
	case !*allActive && tenant == nil && len(ids) == 0:
		return cli.Usage("dev make-due: name the purchase ids, or --all-active, or --tenant ID")
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := requireDevDatabase(ctx, db); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dev make-due: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, makeDueQuery, pgx.NamedArgs{"ids": ids, "tenant": tenant})
	if err != nil {
		return fmt.Errorf("dev make-due: %w", err)
	}
	type madeDue struct {
		id     uuid.UUID
		endsAt time.Time
	}
	due, err := postgres.CollectRows(rows, "dev make-due", func(r *sql.Rows) (madeDue, error) {
		var d madeDue
		return d, r.Scan(&d.id, &d.endsAt)
	})
	if err != nil {
		return err
	}
	if missing := missingIDs(ids, due, func(d madeDue) uuid.UUID { return d.id }); len(missing) > 0 {
		of := ""
		if tenant != nil {
			of = " of tenant " + tenant.String()
		}
		return fmt.Errorf("dev make-due: nothing changed: no Active purchase%s that is not due yet: %s", of, strings.Join(missing, ", "))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dev make-due: %w", err)
	}
	if len(due) == 0 {
		fmt.Fprintln(stderr, "no Active purchase that is not due yet: nothing made due")
		return nil
	}
	for _, d := range due {
		fmt.Fprintf(stdout, "purchase %s is due (ends_at %s)\n", d.id, d.endsAt.UTC().Format("2006-01-02T15:04:05Z"))
	}
	fmt.Fprintf(stdout, "%d purchase(s) due: the next expiry cycle of pin dev (PIN_EXPIRE_INTERVAL) or pin expire-promotions --once expires them\n", len(due))
	return nil
}

// requireDevDatabase refuses a database that does not carry pin dev's
// marker, so make-due never reaches production.
func requireDevDatabase(ctx context.Context, db *sql.DB) error {
	var marker sql.NullString
	err := db.QueryRowContext(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()`).Scan(&marker)
	if err != nil {
		return fmt.Errorf("dev make-due: read the database's marker: %w", err)
	}
	if marker.String != devMarker {
		return errors.New("dev make-due: refused: PIN_DATABASE_URL is not a database pin dev created (it carries no 'pin dev' comment)")
	}
	return nil
}

// missingIDs returns, in the order named, the ids that found has no item
// for.
func missingIDs[T any](named []uuid.UUID, found []T, idOf func(T) uuid.UUID) []string {
	got := make(map[uuid.UUID]bool, len(found))
	for _, f := range found {
		got[idOf(f)] = true
	}
	var missing []string
	for _, id := range named {
		if !got[id] {
			missing = append(missing, id.String())
		}
	}
	return missing
}
