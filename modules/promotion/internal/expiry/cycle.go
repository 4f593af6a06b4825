package expiry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/correlation"
)

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

// recordTimeout bounds the write of the cycle's record, which runs even
// after a stop.
const recordTimeout = 5 * time.Second

// Run runs one cycle: batches while the last one was full and the batch
// limit, the budget and no stop allow; then it counts what is left
// (Backlog) and records the cycle for `pin status`. AsOf is the clock's
// time (UTC, microseconds, as stored); the run id goes on the context, so
// it is in every log line (run_id), on the cycle span and in every event.
//
// Batches run under context.WithoutCancel(ctx): the budget never cuts the
// batch in flight, and a stop (ctx cancelled) lets it run on for
// settings.StopTimeout; it commits or rolls back whole, and then no further
// batch starts. Poison items are not errors. An infrastructure error (of a
// batch, which is rolled back, of the count or of the record) is returned
// with the counts of the batches that committed before it; the next cycle
// retries.
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
	defer release()
	budgetEnd := started.Add(settings.CycleBudget)
	var exclude []uuid.UUID // failed or superseded earlier in this cycle
	for {
		batchStarted := time.Now()
		batchCtx, endBatch := c.observer.Batch(work, settings.BatchSize)
		b, batchErr := c.store.ExpireBatch(batchCtx, ExpireBatch{
			AsOf:        res.AsOf,
			Limit:       settings.BatchSize,
			Exclude:     exclude,
			Expire:      func(p *domain.Purchase) error { return p.Expire(res.AsOf) },
			RetryPoison: PoisonRetries(settings.BatchSize, c.batches.Add(1)-1),
		})
		if batchErr != nil {
			if cause := context.Cause(batchCtx); cause != nil {
				batchErr = fmt.Errorf("%w (%v)", batchErr, cause)
			}
			endBatch(ExpireBatchResult{}, batchErr)
			err = fmt.Errorf("expire batch: %w", batchErr) // rolled back whole
			break
		}
		endBatch(b, nil)
		took := time.Since(batchStarted)
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
			break // the due purchases that are free to take are all done
		}
		if settings.MaxBatchesPerCycle > 0 && res.Batches >= settings.MaxBatchesPerCycle {
			break
		}
		if ctx.Err() != nil {
			break // stopping: the runner waits for this cycle only
		}
		if time.Until(budgetEnd) < took {
			break // another batch like the last would overrun the budget
		}
	}
	if err == nil {
		backlog, countErr := c.store.CountBacklog(work, c.now().UTC())
		if countErr != nil {
			err = fmt.Errorf("count the backlog: %w", countErr)
		} else {
			res.Backlog = &backlog
		}
	}
	res.Duration = time.Since(started)
	// The record is written even after a stop: it is the cycle's last word.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	if recordErr := c.store.RecordCycle(recordCtx, res, err); recordErr != nil {
		err = errors.Join(err, recordErr)
	}
	cancel()
	end(res, err)
	if err != nil {
		return res, fmt.Errorf("expire promotions: run %s: %w", runID, err)
	}
	return res, nil
}
