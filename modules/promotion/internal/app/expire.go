package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/correlation"
)

// ExpireSettings are the expiry cycle's settings (PIN_EXPIRE_*, interfaces.md);
// their defaults live in platform/config, and the module fills them from there.
type ExpireSettings struct {
	// Interval is the time between the starts of two cycles.
	Interval time.Duration
	// BatchSize bounds one batch.
	BatchSize int
	// MaxBatchesPerCycle bounds the batches of a cycle; 0 means as many as
	// the budget allows. A further batch is taken only while the last one
	// was full.
	MaxBatchesPerCycle int
	// CycleBudget bounds when a cycle may start a batch: once the budget
	// is spent no new batch starts, but the batch in flight still commits.
	CycleBudget time.Duration
	// StopTimeout bounds how long a stop lets the batch in flight run on:
	// then its statement is cancelled on the server and it rolls back
	// whole. `pin serve` and `--once` give it half of PIN_SHUTDOWN_TIMEOUT.
	StopTimeout time.Duration
}

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
	// CountDue counts the Active purchases with EndsAt <= asOf: the
	// backlog of the expiry.
	CountDue(ctx context.Context, asOf time.Time) (int, error)
	// CountPoison counts the Active purchases the cycle knows as poison
	// (failed before, retried in the place a batch keeps for them).
	CountPoison(ctx context.Context) (int, error)
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

// PoisonRetries is how many known poison purchases the n-th batch (from 0)
// of a cycle's store retries at most, with limit: a tenth of the batch, at
// least one. One place is kept for them even while due purchases fill
// every batch, so poison is retried at every batch, and a batch never
// holds more than limit; a batch of one keeps it every second batch (odd
// n), so the due purchases move too.
func PoisonRetries(limit int, n uint64) int {
	if limit <= 1 && n%2 == 0 {
		return 0
	}
	return max(limit/10, 1)
}

// RefusedAlikeError fails a batch whose due purchases PostgreSQL all
// refused the same way: one constraint or trigger refusing every row is a
// fault of the schema (a bad migration), not of each row's data.
type RefusedAlikeError struct {
	// Rows is how many due purchases were refused.
	Rows int
	// Refusal is what refused them all (SQLSTATE, table, constraint).
	Refusal string
	// Err is the first row's error.
	Err error
}

// Error says how many rows, what refused them and the first row's error.
func (e *RefusedAlikeError) Error() string {
	return fmt.Sprintf("all %d due purchases of the batch were refused alike (%s), a fault of the schema, not of the rows: %v", e.Rows, e.Refusal, e.Err)
}

// Unwrap returns the first row's error.
func (e *RefusedAlikeError) Unwrap() error { return e.Err }

// RefusedAlike is the rule that keeps a bad migration from quarantining
// the backlog as poison: when at least two due purchases reached
// PostgreSQL (tried) and every one of them was refused with one and the
// same Refusal, it returns a *RefusedAlikeError, which fails the batch as
// a fault; otherwise nil, and the refused rows are poison. A batch of one
// cannot tell and keeps it as poison.
func RefusedAlike(tried int, refused []FailedExpiry) error {
	if tried < 2 || len(refused) != tried || refused[0].Refusal == "" {
		return nil
	}
	for _, f := range refused[1:] {
		if f.Refusal != refused[0].Refusal {
			return nil
		}
	}
	return &RefusedAlikeError{Rows: tried, Refusal: refused[0].Refusal, Err: refused[0].Err}
}

// ExpireCycleResult is what a cycle did. The counters cover the committed
// batches only.
type ExpireCycleResult struct {
	RunID         uuid.UUID
	AsOf          time.Time
	Batches       int
	Expired       int
	SkippedLocked int
	Failed        int
	Duration      time.Duration
}

// MarshalJSON writes the line `pin expire-promotions --once` prints
// (interfaces.md).
func (r ExpireCycleResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RunID         string    `json:"runId"`
		AsOf          time.Time `json:"asOf"`
		Expired       int       `json:"expired"`
		SkippedLocked int       `json:"skippedLocked"`
		Failed        int       `json:"failed"`
		DurationMs    int64     `json:"durationMs"`
	}{r.RunID.String(), r.AsOf, r.Expired, r.SkippedLocked, r.Failed, r.Duration.Milliseconds()})
}

// ExpireObserver reports an expiry cycle, which itself knows no telemetry
// (ports.ExpireTelemetry writes the logs, metrics and spans). Each method is
// called as its work starts, and returns the context the work runs under (so
// a span carries what follows) and end, which the cycle calls once with the
// work's outcome.
type ExpireObserver interface {
	// Cycle reports a cycle whose RunID and AsOf are set; end gets its
	// counts and duration, and the infrastructure error it ended on, if any.
	Cycle(ctx context.Context, cycle ExpireCycleResult, settings ExpireSettings) (_ context.Context, end func(ExpireCycleResult, error))
	// Batch reports a batch of at most limit rows; end gets what it
	// committed, or the error that rolled it back.
	Batch(ctx context.Context, limit int) (_ context.Context, end func(ExpireBatchResult, error))
}

// ExpireCycle runs expiry cycles: every Active purchase whose EndsAt has
// passed becomes Expired (INV-6), with its event, batch by batch. Several
// cycles, in one process or many, may run at once: the row locks (FOR
// UPDATE SKIP LOCKED) give each purchase to one of them.
type ExpireCycle struct {
	store    ExpireStore
	observer ExpireObserver
	now      func() time.Time
	batches  atomic.Uint64 // batches started, for PoisonRetries
}

// NewExpireCycle builds the cycle on store, reporting to observer. now is
// the clock that sets AsOf; time.Now when nil.
func NewExpireCycle(store ExpireStore, observer ExpireObserver, now func() time.Time) (*ExpireCycle, error) {
	if store == nil || observer == nil {
		return nil, errors.New("app: expire cycle: a store and an observer are required")
	}
	if now == nil {
		now = time.Now
	}
	return &ExpireCycle{store: store, observer: observer, now: now}, nil
}

// Run runs one cycle. AsOf is the clock's time (UTC, microseconds, as
// stored); the cycle's run id goes on the context, so it is in every log
// line (run_id), on the cycle span and in every event (correlation id).
//
// Batches run under context.WithoutCancel(ctx): the budget never cuts the
// batch in flight, and a stop (ctx cancelled) lets it run on for
// settings.StopTimeout; it commits or rolls back whole, and then no further
// batch starts. Poison items are not errors; an infrastructure error is
// returned together with the counts of the batches that committed before
// it.
func (c *ExpireCycle) Run(ctx context.Context, settings ExpireSettings) (ExpireCycleResult, error) {
	started := time.Now()
	if settings.BatchSize <= 0 || settings.CycleBudget <= 0 || settings.StopTimeout <= 0 {
		return ExpireCycleResult{}, fmt.Errorf("expire promotions: batch size %d, budget %s and stop timeout %s must be positive (PIN_EXPIRE_*)",
			settings.BatchSize, settings.CycleBudget, settings.StopTimeout)
	}
	runID, err := uuid.NewV7()
	if err != nil {
		return ExpireCycleResult{}, fmt.Errorf("expire promotions: run id: %w", err)
	}
	res := ExpireCycleResult{RunID: runID, AsOf: c.now().UTC().Truncate(time.Microsecond)}
	ctx = correlation.WithRunID(ctx, runID.String())
	ctx, end := c.observer.Cycle(ctx, res, settings)

	// The work is not cancelled with ctx, nor by the budget: a batch is
	// finished whole, unless a stop has waited StopTimeout for it.
	work, release := afterStop(ctx, settings.StopTimeout)
	err = c.runBatches(ctx, work, started.Add(settings.CycleBudget), settings, &res)
	release()
	res.Duration = time.Since(started)
	end(res, err)
	if err != nil {
		return res, fmt.Errorf("expire promotions: run %s: %w", runID, err)
	}
	return res, nil
}

// runBatches takes batches while the last one was full, the batch limit
// and the budget (spent at budgetEnd) allow, and nobody asked to stop. It
// stops at the first infrastructure error: that batch is rolled back, and
// the next cycle retries it.
func (c *ExpireCycle) runBatches(ctx, work context.Context, budgetEnd time.Time, settings ExpireSettings, res *ExpireCycleResult) error {
	var exclude []uuid.UUID
	var last time.Duration
	for {
		if res.Batches > 0 && !mayTakeAnother(ctx, budgetEnd, settings, res.Batches, last) {
			return nil
		}
		batchStarted := time.Now()
		b, err := c.runBatch(work, settings, res.AsOf, exclude)
		last = time.Since(batchStarted)
		if err != nil {
			return err
		}
		res.Batches++
		res.Expired += len(b.Expired)
		res.Failed += len(b.Failed)
		res.SkippedLocked += b.SkippedLocked + len(b.Superseded)
		for _, f := range b.Failed {
			exclude = append(exclude, f.PurchaseID)
		}
		for _, s := range b.Superseded {
			exclude = append(exclude, s.PurchaseID)
		}
		if b.Selected-b.Retried < settings.BatchSize-b.KeptForPoison {
			return nil // the due purchases that are free to take are all done
		}
	}
}

// mayTakeAnother decides whether a full batch is followed by another in the
// same cycle. A batch is started only when the budget left is at least what
// the last batch took, so the cycle is expected to end within its budget.
func mayTakeAnother(ctx context.Context, budgetEnd time.Time, settings ExpireSettings, done int, last time.Duration) bool {
	if settings.MaxBatchesPerCycle > 0 && done >= settings.MaxBatchesPerCycle {
		return false
	}
	if ctx.Err() != nil {
		return false // stopping: the runner waits for this cycle only
	}
	return time.Until(budgetEnd) >= last
}

// afterStop is ctx without its cancellation, cancelled only timeout after
// ctx is: a stop lets the batch in flight finish, but not forever.
// release frees its timer.
func afterStop(ctx context.Context, timeout time.Duration) (work context.Context, release func()) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopped := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(timeout, func() {
			cancel(fmt.Errorf("stopped: the batch in flight did not finish within the stop timeout (%s)", timeout))
		})
		context.AfterFunc(work, func() { t.Stop() })
	})
	return work, func() { stopped(); cancel(nil) }
}

// runBatch runs one batch and reports it.
func (c *ExpireCycle) runBatch(ctx context.Context, settings ExpireSettings, asOf time.Time, exclude []uuid.UUID) (ExpireBatchResult, error) {
	ctx, end := c.observer.Batch(ctx, settings.BatchSize)
	b, err := c.store.ExpireBatch(ctx, ExpireBatch{
		AsOf:        asOf,
		Limit:       settings.BatchSize,
		Exclude:     exclude,
		Expire:      func(p *domain.Purchase) error { return p.Expire(asOf) },
		RetryPoison: PoisonRetries(settings.BatchSize, c.batches.Add(1)-1),
	})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		end(ExpireBatchResult{}, err)
		return ExpireBatchResult{}, fmt.Errorf("expire batch: %w", err)
	}
	end(b, nil)
	return b, nil
}
