package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/platform/postgres"
)

// PoisonPurchase is a purchase the expiry job remembers as poison (a row
// of promotion.expire_poison with its purchase), as an operator lists it.
type PoisonPurchase struct {
	PurchaseID  uuid.UUID `json:"purchaseId"`
	TenantID    uuid.UUID `json:"tenantId"`
	PackageCode string    `json:"packageCode"`
	Status      string    `json:"status"`
	EndsAt      time.Time `json:"endsAt"`
	// Attempts is how often the job failed to expire it.
	Attempts      int       `json:"attempts"`
	FirstFailedAt time.Time `json:"firstFailedAt"`
	LastAttemptAt time.Time `json:"lastAttemptAt"`
	LastError     string    `json:"lastError"`
}

// ErrPoisonNotFound is wrapped by ReleasePoison when a named purchase is not
// remembered as poison (never was, expired since, or released already).
var ErrPoisonNotFound = errors.New("purchase not remembered as poison")

// listPoison reads the poison purchases (x) with their purchases (p), in
// the order of scanPoison's columns, the first to fail first.
const listPoison = `SELECT x.purchase_id, p.tenant_id, p.package_code, p.status, p.ends_at,
	x.failures, x.first_failed_at, x.last_attempt_at, x.last_error
FROM promotion.expire_poison x JOIN promotion.promotion_purchases p ON p.id = x.purchase_id
ORDER BY x.first_failed_at, x.purchase_id`

// releasePoison forgets every poison purchase when @all, else those of
// @ids, and returns them as listPoison does.
const releasePoison = `WITH released AS (
	DELETE FROM promotion.expire_poison WHERE @all OR purchase_id = ANY(@ids::uuid[]) RETURNING *)
SELECT x.purchase_id, p.tenant_id, p.package_code, p.status, p.ends_at,
	x.failures, x.first_failed_at, x.last_attempt_at, x.last_error
FROM released x JOIN promotion.promotion_purchases p ON p.id = x.purchase_id
ORDER BY x.first_failed_at, x.purchase_id`

// ListPoison returns the poison purchases, the first to fail first.
func ListPoison(ctx context.Context, db *sql.DB) ([]PoisonPurchase, error) {
	rows, err := db.QueryContext(ctx, listPoison)
	if err != nil {
		return nil, fmt.Errorf("list poison purchases: %w", err)
	}
	return scanPoison(rows)
}

// ReleasePoison forgets the named purchases, or every one when ids is nil
// and all is set, so that the next expiry cycle takes them in a regular
// slot (and remembers them again if they still fail). It is all or
// nothing: when one of ids is not remembered, nothing changes.
func ReleasePoison(ctx context.Context, db *sql.DB, ids []uuid.UUID, all bool) ([]PoisonPurchase, error) {
	if all == (len(ids) > 0) {
		return nil, errors.New("release poison purchases: name purchases or all, not both")
	}
	gdb, err := postgres.GORMOn(db) // an operator's command holds only the pool
	if err != nil {
		return nil, fmt.Errorf("release poison purchases: %w", err)
	}
	var released []PoisonPurchase
	err = postgres.InTx(ctx, gdb, func(tx postgres.Tx) error {
		rows, err := tx.QueryContext(ctx, releasePoison, pgx.NamedArgs{"all": all, "ids": uuidStrings(ids)})
		if err != nil {
			return fmt.Errorf("release poison purchases: %w", err)
		}
		released, err = scanPoison(rows)
		if err != nil {
			return fmt.Errorf("release poison purchases: %w", err)
		}
		var missing []string
		for _, id := range ids {
			if !slices.ContainsFunc(released, func(p PoisonPurchase) bool { return p.PurchaseID == id }) {
				missing = append(missing, id.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: %s (never failed, expired since, or already released); nothing released",
				ErrPoisonNotFound, strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return released, nil
}

// scanPoison reads listPoison's columns from every row and closes rows.
func scanPoison(rows *sql.Rows) ([]PoisonPurchase, error) {
	defer func() { _ = rows.Close() }()
	var out []PoisonPurchase
	for rows.Next() {
		var p PoisonPurchase
		if err := rows.Scan(&p.PurchaseID, &p.TenantID, &p.PackageCode, &p.Status, &p.EndsAt,
			&p.Attempts, &p.FirstFailedAt, &p.LastAttemptAt, &p.LastError); err != nil {
			return nil, err
		}
		p.EndsAt, p.FirstFailedAt, p.LastAttemptAt = p.EndsAt.UTC(), p.FirstFailedAt.UTC(), p.LastAttemptAt.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
