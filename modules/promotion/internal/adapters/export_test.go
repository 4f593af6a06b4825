package adapters

import (
	"database/sql"
	"time"

	"github.com/google/uuid"
)

// SaveTransition exposes the version-guarded write to the tests: through
// UpdatePurchase, which locks the row first, the guard never trips.
var SaveTransition = (*PurchaseRepository).saveTransition

// LegacyEventID is the messageId a snapshot gives a purchase whose row
// keeps no last event.
func LegacyEventID(purchaseID uuid.UUID, version int64) uuid.UUID {
	return storedLastEvent(purchaseID, version, time.Time{}, uuid.NullUUID{}, sql.NullTime{}).id
}

// SetTimeouts sets the batch's server-side timeouts, for a test that would
// otherwise wait the defaults' seconds for one.
func (r *ExpireRepository) SetTimeouts(t ExpireTimeouts) { r.session = batchSession(t) }
