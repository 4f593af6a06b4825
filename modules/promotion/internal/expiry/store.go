package expiry

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// ExpireStore is the storage side of the expiry cycle.
type ExpireStore interface {
	// ExpireBatch runs one batch in one transaction: it locks up to
	// b.Limit Active purchases with EndsAt <= b.AsOf (oldest EndsAt first,
	// ties by id), skipping rows another transaction holds, lets b.Expire
	// make each transition, and stores the transitions together with their
	// events. A purchase that cannot be expired, whose event cannot be built
	// or whose row's own statement is refused for its data (SQLSTATE class
	// 22 or 23, naming no other table) is left out (Failed) and stays
	// Active; one another writer changed since it was selected is left out
	// too (Superseded); the rest commits. Any other error, a fault of the
	// database (a lock or statement timeout, a refusal of the outbox's
	// insert, RefusedAlike), rolls the whole batch back and is returned; the
	// locks are released either way.
	ExpireBatch(ctx context.Context, b ExpireBatch) (ExpireBatchResult, error)
	// CountBacklog counts, as of asOf, what the cycles leave: the due
	// purchases not yet known as poison (the work still to do) and the
	// known poison purchases that are still Active.
	CountBacklog(ctx context.Context, asOf time.Time) (ExpireBacklog, error)
	// RecordCycle keeps c, ended by cycleErr (nil: completed), as the last
	// cycle any instance finished, for `pin status`: an instance's metrics
	// die with it, and a cycle that expired nothing leaves no event.
	RecordCycle(ctx context.Context, c ExpireCycleResult, cycleErr error) error
}

// ExpireBatch is what one batch of the expiry cycle works on.
type ExpireBatch struct {
	// AsOf is the cycle's moment: purchases with EndsAt <= AsOf are due.
	AsOf time.Time
	// Limit is the batch size.
	Limit int
	// Exclude lists purchases that failed earlier in the same cycle, so a
	// later batch of the cycle does not take the same poison items again.
	Exclude []uuid.UUID
	// Expire applies the transition to one locked purchase. The store may
	// call it for different purchases concurrently.
	Expire func(*domain.Purchase) error
	// RetryPoison bounds the known poison purchases the batch retries,
	// least recently tried first, in the room its due purchases leave; one
	// place of Limit is kept for them even when due purchases would fill
	// it (PoisonRetries). 0 retries none.
	RetryPoison int
}

// ExpireBatchResult is the outcome of a committed batch.
type ExpireBatchResult struct {
	// Selected is how many purchases the batch locked, Retried included.
	Selected int
	// Retried is how many of them were known poison, taken in the room
	// the due purchases left under the batch's limit.
	Retried int
	// KeptForPoison is how many places of the limit the batch kept for
	// known poison (0 or 1): its due purchases took at most Limit minus it.
	KeptForPoison int
	// Expired are the purchases whose transition and event committed, in
	// selection order.
	Expired []*domain.Purchase
	// Failed are the poison items: left out of the batch, still Active.
	Failed []FailedExpiry
	// Superseded are the purchases whose row another writer changed between
	// the selection and the write (a lost version race), as re-read: not
	// poison, dropped from the batch, and counted with the skipped ones.
	Superseded []SupersededExpiry
	// SkippedLocked is how many due purchases the selection passed over
	// because another transaction held their rows.
	SkippedLocked int
}

// SupersededExpiry is a purchase whose expiry lost a version race, with its
// row as re-read after the loss.
type SupersededExpiry struct {
	PurchaseID uuid.UUID
	Status     domain.Status // empty when the row is gone
	Version    int64
}

// FailedExpiry is a purchase that a batch could not expire.
type FailedExpiry struct {
	PurchaseID uuid.UUID
	Err        error
	// Refusal names what refused the row's own statement when PostgreSQL
	// did (SQLSTATE, table, constraint); empty for a failure found in Go.
	Refusal string
}

// ExpireBacklog is what a cycle leaves to the next ones, counted after its
// batches: promotion_expire_backlog and promotion_expire_poison_purchases.
type ExpireBacklog struct {
	// Due is the Active purchases with EndsAt <= AsOf that are not known
	// poison: work the next cycles will do.
	Due int
	// Poison is the known poison purchases still Active, retried in the
	// place each batch keeps for them.
	Poison int
}
