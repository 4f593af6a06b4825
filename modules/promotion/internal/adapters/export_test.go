package adapters

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/postgres"
)

// InsertIn runs Add's one statement for p, built on pkg, inside tx: a test
// holds tx open to stand for a concurrent request caught in that statement.
func (r *PurchaseRepository) InsertIn(ctx context.Context, tx postgres.Tx, pkg *domain.Package, p *domain.Purchase,
	claim *app.IdempotencyRecord) (bool, error) {
	return r.insert(ctx, tx, &builtPurchase{pkg: pkg, purchase: p}, claim)
}

// SaveTransition exposes the version-guarded write to the tests: through
// UpdatePurchase, which locks the row first, the guard never trips.
var SaveTransition = (*PurchaseRepository).saveTransition

// LegacyEventID is the messageId a snapshot gives a purchase whose row
// keeps no last event.
func LegacyEventID(purchaseID uuid.UUID, version int64) uuid.UUID {
	ev, _ := storedLastEvent(purchaseID, version, time.Time{}, uuid.NullUUID{}, sql.NullTime{})
	return ev.id
}

// SetTimeouts sets the batch's server-side timeouts, for a test that would
// otherwise wait the defaults' seconds for one.
func (r *ExpireRepository) SetTimeouts(t ExpireTimeouts) { r.timeouts = t.args() }
