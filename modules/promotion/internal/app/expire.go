package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/correlation"
)

// ExpireSettings are the expiry cycle's settings (PIN_EXPIRE_*, interfaces.md).
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
}

// DefaultExpireSettings are the design document's: a 60 s interval, one
// batch of 200 per cycle, a 30 s budget.
func DefaultExpireSettings() ExpireSettings {
	return ExpireSettings{Interval: 60 * time.Second, BatchSize: 200, MaxBatchesPerCycle: 1, CycleBudget: 30 * time.Second}
}

// WithDefaults fills the zero Interval, BatchSize and CycleBudget from
// DefaultExpireSettings. A zero MaxBatchesPerCycle stays: it means no limit.
func (s ExpireSettings) WithDefaults() ExpireSettings {
	d := DefaultExpireSettings()
	if s.Interval <= 0 {
		s.Interval = d.Interval
	}
	if s.BatchSize <= 0 {
		s.BatchSize = d.BatchSize
	}
	if s.CycleBudget <= 0 {
		s.CycleBudget = d.CycleBudget
	}
	return s
}

// ExpireStore is the storage side of the expiry cycle.
type ExpireStore interface {
	// ExpireBatch runs one batch in one transaction: it locks up to
	// b.Limit Active purchases with EndsAt <= b.AsOf (oldest EndsAt first,
	// ties by id), skipping rows another transaction holds, lets b.Expire
	// make each transition, and stores the transitions together with their
	// events. A purchase that cannot be expired, whose event cannot be built
	// or whose row's own data is refused (SQLSTATE class 22 or 23) is left
	// out (Failed) and stays Active; one another writer changed since it was
	// selected is left out too (Superseded); the rest commits. Any other
	// error, a fault of the database, rolls the whole batch back and is
	// returned; the locks are released either way.
	ExpireBatch(ctx context.Context, b ExpireBatch) (ExpireBatchResult, error)
	// CountDue counts the Active purchases with EndsAt <= asOf: the
	// backlog of the expiry.
	CountDue(ctx context.Context, asOf time.Time) (int, error)
	// CountPoison counts the Active purchases the cycle knows as poison
	// (failed before, retried only in the room a batch leaves).
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
}

// ExpireBatchResult is the outcome of a committed batch.
type ExpireBatchResult struct {
	// Selected is how many purchases the batch locked, Retried included.
	Selected int
	// Retried is how many of them were known poison, taken in the room
	// the due purchases left under the batch's limit.
	Retried int
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

// ExpireObserver is what an expiry cycle reports, in the order it happens:
// a cycle's start, each batch's start and outcome, the cycle's outcome.
// Logs, metrics and spans implement it (ports.ExpireTelemetry); the cycle
// itself knows none of them. A Started method returns the context the work
// runs under, so a span can carry what follows.
type ExpireObserver interface {
	// CycleStarted reports a cycle whose RunID and AsOf are set.
	CycleStarted(ctx context.Context, cycle ExpireCycleResult, settings ExpireSettings) context.Context
	// BatchStarted reports a batch about to run with limit rows at most.
	BatchStarted(ctx context.Context, limit int) context.Context
	// BatchCommitted reports a committed batch: what it selected, expired,
	// left out as poison and dropped as changed by another writer.
	BatchCommitted(ctx context.Context, batch ExpireBatchResult)
	// BatchFailed reports a batch rolled back on an infrastructure error.
	BatchFailed(ctx context.Context, err error)
	// CycleCompleted reports a cycle that ended without an infrastructure
	// error, with its counts and duration.
	CycleCompleted(ctx context.Context, cycle ExpireCycleResult)
	// CycleFailed reports a cycle that ended on err, with the counts of the
	// batches committed before it.
	CycleFailed(ctx context.Context, cycle ExpireCycleResult, err error)
}

// ExpireCycle runs expiry cycles: every Active purchase whose EndsAt has
// passed becomes Expired (INV-6), with its event, batch by batch. Several
// cycles, in one process or many, may run at once: the row locks (FOR
// UPDATE SKIP LOCKED) give each purchase to one of them.
type ExpireCycle struct {
	store    ExpireStore
	observer ExpireObserver
	now      func() time.Time
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
// Batches run under context.WithoutCancel(ctx): neither the budget nor a
// stop (ctx cancelled) cuts the batch in flight; it commits or rolls back
// whole, and then no further batch starts. Only the end of the process (a
// stop's deadline) can roll it back. Poison items are not errors; an
// infrastructure error is returned together with the counts of the batches
// that committed before it.
func (c *ExpireCycle) Run(ctx context.Context, settings ExpireSettings) (ExpireCycleResult, error) {
	started := time.Now()
	if settings.BatchSize <= 0 || settings.CycleBudget <= 0 {
		return ExpireCycleResult{}, fmt.Errorf("expire promotions: batch size %d and budget %s must be positive (ExpireSettings.WithDefaults)", settings.BatchSize, settings.CycleBudget)
	}
	runID, err := uuid.NewV7()
	if err != nil {
		return ExpireCycleResult{}, fmt.Errorf("expire promotions: run id: %w", err)
	}
	res := ExpireCycleResult{RunID: runID, AsOf: c.now().UTC().Truncate(time.Microsecond)}
	ctx = correlation.WithRunID(ctx, runID.String())
	ctx = c.observer.CycleStarted(ctx, res, settings)

	// The work is not cancelled with ctx, nor by the budget: a batch is
	// finished whole.
	err = c.runBatches(ctx, context.WithoutCancel(ctx), started.Add(settings.CycleBudget), settings, &res)
	res.Duration = time.Since(started)
	if err != nil {
		c.observer.CycleFailed(ctx, res, err)
		return res, fmt.Errorf("expire promotions: run %s: %w", runID, err)
	}
	c.observer.CycleCompleted(ctx, res)
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
		if b.Selected-b.Retried < settings.BatchSize {
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

// runBatch runs one batch and reports it.
func (c *ExpireCycle) runBatch(ctx context.Context, settings ExpireSettings, asOf time.Time, exclude []uuid.UUID) (ExpireBatchResult, error) {
	ctx = c.observer.BatchStarted(ctx, settings.BatchSize)
	b, err := c.store.ExpireBatch(ctx, ExpireBatch{
		AsOf:    asOf,
		Limit:   settings.BatchSize,
		Exclude: exclude,
		Expire:  func(p *domain.Purchase) error { return p.Expire(asOf) },
	})
	if err != nil {
		c.observer.BatchFailed(ctx, err)
		return ExpireBatchResult{}, fmt.Errorf("expire batch: %w", err)
	}
	c.observer.BatchCommitted(ctx, b)
	return b, nil
}
