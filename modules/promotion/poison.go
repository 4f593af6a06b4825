package promotion

import (
	"context"
	"database/sql"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/platform/postgres"
)

// PoisonPurchase is a purchase the expiry job remembers as poison, as
// `pin promotion poison list` prints it (docs/runbooks/expire-promotions.md).
type PoisonPurchase = adapters.PoisonPurchase

// ErrPoisonNotFound is wrapped by ReleasePoison when a named purchase is not
// remembered as poison.
var ErrPoisonNotFound = adapters.ErrPoisonNotFound

// ListPoison returns the purchases the expiry job remembers as poison, the
// first to fail first. It needs no Module: an operator's command has only
// the database.
func ListPoison(ctx context.Context, db *sql.DB) ([]PoisonPurchase, error) {
	return adapters.ListPoison(ctx, db)
}

// ReleasePoison forgets the named purchases (every one with all), so that
// the next expiry cycle takes them in normal order; all or nothing, as
// adapters.ReleasePoison.
func ReleasePoison(ctx context.Context, db *sql.DB, ids []uuid.UUID, all bool) ([]PoisonPurchase, error) {
	return adapters.ReleasePoison(ctx, db, ids, all)
}

// ExpiryStatus is the expiry job's backlog, poison and last cycle, as
// `pin status` shows them.
type ExpiryStatus = adapters.ExpiryStatus

// LastCycle is the last expiry cycle an instance finished.
type LastCycle = adapters.LastCycle

// ReadExpiryStatus reads the expiry's state; like ListPoison it needs only
// the database.
func ReadExpiryStatus(ctx context.Context, db postgres.Querier) (ExpiryStatus, error) {
	return adapters.ReadExpiryStatus(ctx, db)
}
