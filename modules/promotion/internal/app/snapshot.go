package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// Snapshot limits (docs/runbooks/consumer-current-state.md, "How it runs").
const (
	// DefaultSnapshotBatchSize is how many purchases one snapshot
	// transaction holds at most: the longest a transition waits for it.
	DefaultSnapshotBatchSize = 100
	// MaxSnapshotBatchSize bounds --batch-size.
	MaxSnapshotBatchSize = 1000
	// DefaultSnapshotRate is the events per second of a snapshot unless
	// told otherwise.
	DefaultSnapshotRate = 500
	// snapshotProgressEvery spaces the progress reports.
	snapshotProgressEvery = time.Second
)

// ErrInvalidSnapshot is wrapped by an error about a snapshot's options: the
// run writes nothing.
var ErrInvalidSnapshot = errors.New("invalid snapshot options")

// ErrSnapshotStopped is wrapped by the error of a run stopped (its context
// cancelled) before it reached the end; every batch it started committed,
// and its result says where to resume.
var ErrSnapshotStopped = errors.New("snapshot stopped")

// SnapshotFilter selects the purchases a snapshot republishes.
type SnapshotFilter struct {
	// TenantID restricts it to one tenant's purchases; uuid.Nil for all.
	TenantID uuid.UUID
	// PurchaseIDs restricts it to these purchases; none for all.
	PurchaseIDs []uuid.UUID
	// TargetKind restricts it to purchases with a target of this kind;
	// empty for any.
	TargetKind domain.TargetKind
	// IncludeEnded takes purchases of every status, not only Active ones.
	IncludeEnded bool
}

// SnapshotStore is the storage side of a snapshot.
type SnapshotStore interface {
	// SnapshotBatch runs one batch in one transaction: it locks, in id order,
	// up to b.Limit purchases after b.After that match b.Filter, with a lock
	// that makes a transition of one of them wait until the batch commits
	// (and makes the batch wait for a transition in flight, then read its
	// result), and writes one event per purchase into the outbox with its
	// stored state and version, a new message id and b.SnapshotID as its
	// correlation id. A purchase whose event cannot be built is left out
	// (Failed); any other error rolls the batch back.
	SnapshotBatch(ctx context.Context, b SnapshotBatch) (SnapshotBatchResult, error)
}

// SnapshotBatch is what one batch of a snapshot works on.
type SnapshotBatch struct {
	SnapshotID uuid.UUID
	Filter     SnapshotFilter
	// After is the keyset position: only purchases with a greater id;
	// uuid.Nil from the start.
	After uuid.UUID
	Limit int
}

// SnapshotBatchResult is what a committed batch did.
type SnapshotBatchResult struct {
	// Read is how many purchases the batch locked; fewer than its limit
	// means there are no more.
	Read int
	// Last is the greatest id read: the next batch's After.
	Last uuid.UUID
	// Events is how many events it wrote.
	Events int
	// Failed are the purchases it read but wrote no event for.
	Failed []FailedSnapshot
}

// FailedSnapshot is a purchase a snapshot could not build the event of
// (a poison purchase: no targets, a value the contract does not know).
type FailedSnapshot struct {
	PurchaseID uuid.UUID
	Err        error
}

// SnapshotProgress is where a snapshot run stands; the last one is its
// result, the JSON line `pin promotion snapshot` prints.
type SnapshotProgress struct {
	// SnapshotID is the run's id, every event's correlation_id.
	SnapshotID uuid.UUID `json:"snapshotId"`
	// Events is how many events this run wrote.
	Events int `json:"events"`
	// Failed is how many purchases this run could not write an event for.
	Failed int `json:"failed"`
	// After is the last purchase done: a resumed run starts after it.
	After uuid.UUID `json:"after,omitzero"`
	// Complete is false when the run stopped before the end.
	Complete bool `json:"complete"`
}

// SnapshotObserver is told how a snapshot run goes.
type SnapshotObserver interface {
	// Progress is called about once a second while the run goes on.
	Progress(SnapshotProgress)
	// Failed is called for each purchase left out.
	Failed(FailedSnapshot)
}

// SnapshotCommand asks for a snapshot run.
type SnapshotCommand struct {
	// SnapshotID is the run's id; uuid.Nil makes a new one. A resumed run
	// passes the id of the run it resumes.
	SnapshotID uuid.UUID
	Filter     SnapshotFilter
	// After resumes a stopped run after this purchase id.
	After uuid.UUID
	// Rate is the events per second at most (DefaultSnapshotRate is the
	// command's default).
	Rate int
	// BatchSize bounds one transaction (DefaultSnapshotBatchSize is the
	// command's default).
	BatchSize int
}

// Validate checks the command: a rate of at least one event a second, a
// batch size of 1 to MaxSnapshotBatchSize, a known target kind or none.
func (c SnapshotCommand) Validate() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("%w: rate %d: must be at least 1 event a second", ErrInvalidSnapshot, c.Rate)
	case c.BatchSize <= 0 || c.BatchSize > MaxSnapshotBatchSize:
		return fmt.Errorf("%w: batch size %d: must be 1 to %d", ErrInvalidSnapshot, c.BatchSize, MaxSnapshotBatchSize)
	case c.Filter.TargetKind != "" && !c.Filter.TargetKind.IsValid():
		return fmt.Errorf("%w: unknown target kind %q (want one of %v)", ErrInvalidSnapshot, c.Filter.TargetKind, domain.TargetKinds)
	}
	return nil
}

// SnapshotHandler republishes the current state of purchases (a snapshot
// run): batch by batch in id order, paced to the rate, until a batch comes
// back short.
type SnapshotHandler struct {
	store SnapshotStore
	now   func() time.Time
	newID func() (uuid.UUID, error)
}

// NewSnapshotHandler returns the handler; now is time.Now when nil.
func NewSnapshotHandler(store SnapshotStore, now func() time.Time) SnapshotHandler {
	if now == nil {
		now = time.Now
	}
	return SnapshotHandler{store: store, now: now, newID: uuid.NewV7}
}

// Handle runs the snapshot. A batch runs to its commit even when ctx is
// cancelled meanwhile; the run then stops before the next batch, and
// returns what it did with an error wrapping ErrSnapshotStopped. A store
// error ends the run too: the batches before it stay committed, and the
// result says where to resume.
func (h SnapshotHandler) Handle(ctx context.Context, cmd SnapshotCommand, obs SnapshotObserver) (SnapshotProgress, error) {
	if err := cmd.Validate(); err != nil {
		return SnapshotProgress{}, err
	}
	if cmd.SnapshotID == uuid.Nil {
		var err error
		if cmd.SnapshotID, err = h.newID(); err != nil {
			return SnapshotProgress{}, fmt.Errorf("snapshot id: %w", err)
		}
	}
	res := SnapshotProgress{SnapshotID: cmd.SnapshotID, After: cmd.After}
	// A batch never holds more than a second's worth of the rate.
	limit := min(cmd.BatchSize, cmd.Rate)
	start := h.now()
	reported := start
	read := 0
	for {
		// Pace: the next batch starts once the rows read so far fit the rate.
		if err := sleepUntil(ctx, h.now, start.Add(time.Duration(read)*time.Second/time.Duration(cmd.Rate))); err != nil {
			return res, fmt.Errorf("%w after %d events: %w", ErrSnapshotStopped, res.Events, err)
		}
		b, err := h.store.SnapshotBatch(context.WithoutCancel(ctx), SnapshotBatch{
			SnapshotID: cmd.SnapshotID, Filter: cmd.Filter, After: res.After, Limit: limit,
		})
		if err != nil {
			return res, fmt.Errorf("snapshot %s after %s: %w", res.SnapshotID, res.After, err)
		}
		read += b.Read
		res.Events += b.Events
		res.Failed += len(b.Failed)
		if b.Read > 0 {
			res.After = b.Last
		}
		for _, f := range b.Failed {
			obs.Failed(f)
		}
		if b.Read < limit {
			res.Complete = true
			return res, nil
		}
		if now := h.now(); now.Sub(reported) >= snapshotProgressEvery {
			reported = now
			obs.Progress(res)
		}
	}
}

// sleepUntil waits until the clock reads at least until, or ctx ends.
func sleepUntil(ctx context.Context, now func() time.Time, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := until.Sub(now())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
