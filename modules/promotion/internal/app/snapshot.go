package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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
// and its stored position says where it resumes.
var ErrSnapshotStopped = errors.New("snapshot stopped")

// ErrSnapshotNotFound is wrapped by the error of a resume whose snapshot id
// no snapshot has.
var ErrSnapshotNotFound = errors.New("snapshot not found")

// ErrSnapshotMovedOn is wrapped by a batch's error when the snapshot's stored
// position is no longer where this run left it: another process resumed the
// same snapshot. The batch wrote nothing.
var ErrSnapshotMovedOn = errors.New("snapshot moved on under another process")

// SnapshotFilter selects the purchases a snapshot redelivers the last events of.
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

// SnapshotRun is a snapshot as it is stored: what it selects and where it
// stands. Its progress is durable: each batch moves it in the transaction
// that writes the batch's events.
type SnapshotRun struct {
	ID     uuid.UUID
	Filter SnapshotFilter
	// After is the last purchase done, in id order; uuid.Nil before the
	// first batch.
	After uuid.UUID
	// Events and Failed count every batch of the snapshot, across resumes.
	Events, Failed int
	// Complete is true once a batch found the end.
	Complete bool
}

// SnapshotStore is the storage side of a snapshot.
type SnapshotStore interface {
	// StartSnapshot stores a new snapshot, at the start.
	StartSnapshot(ctx context.Context, run SnapshotRun) error
	// Snapshot returns a stored snapshot, or an error wrapping
	// ErrSnapshotNotFound.
	Snapshot(ctx context.Context, id uuid.UUID) (SnapshotRun, error)
	// SnapshotBatch runs one batch in one transaction. It locks the
	// snapshot's row and checks that it still stands at b.After (else
	// ErrSnapshotMovedOn, nothing written); then it locks, in id order, up
	// to b.Limit purchases after b.After that match b.Filter, with a lock
	// that makes a transition of one of them wait until the batch commits
	// (and makes the batch wait for a transition in flight, then read its
	// result), and redelivers each one's last published event into the
	// outbox: its messageId, occurredAt, version and payload, with
	// b.SnapshotID as its correlation id. A purchase whose last messageId
	// the row does not keep is left out (Unknown), or, with
	// b.SendDerivedIDs, redelivered under an id derived from it (Unknown,
	// Sent). A purchase whose event cannot be built is left out (Failed);
	// any other error rolls the batch back. The
	// snapshot's row moves to the last purchase read, with the batch's
	// counts, and is complete when the batch read fewer than b.Limit.
	SnapshotBatch(ctx context.Context, b SnapshotBatch) (SnapshotBatchResult, error)
}

// SnapshotBatch is what one batch of a snapshot works on.
type SnapshotBatch struct {
	SnapshotID uuid.UUID
	Filter     SnapshotFilter
	// After is the keyset position, where the stored snapshot stands:
	// only purchases with a greater id; uuid.Nil from the start.
	After uuid.UUID
	Limit int
	// SendDerivedIDs sends a purchase whose last messageId is unknown under
	// an id derived from it, instead of leaving it out (ADR 0012).
	SendDerivedIDs bool
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
	// Unknown are the purchases it read whose last messageId is unknown:
	// left out, or sent under a derived id (Sent) with SendDerivedIDs.
	Unknown []UnknownIDSnapshot
}

// UnknownIDSnapshot is a purchase whose row keeps no messageId of its last
// event (the event left the outbox before migration 00008): its original
// id is lost. It marshals to the line `pin promotion snapshot` writes to
// stderr for each of them.
type UnknownIDSnapshot struct {
	// Action is "skipped", or "sent-under-derived-id" with SendDerivedIDs.
	Action     string    `json:"unknownMessageId"`
	PurchaseID uuid.UUID `json:"purchaseId"`
	TenantID   uuid.UUID `json:"tenantId"`
	Status     string    `json:"status"`
	Version    int64     `json:"version"`
	// DerivedID is the messageId it was sent under; nil when skipped.
	DerivedID uuid.UUID `json:"derivedMessageId,omitzero"`
}

// What a snapshot did with a purchase whose last messageId is unknown.
const (
	UnknownIDSkipped = "skipped"
	UnknownIDSent    = "sent-under-derived-id"
)

// Sent reports whether the purchase was redelivered, under a derived id.
func (u UnknownIDSnapshot) Sent() bool { return u.Action == UnknownIDSent }

// FailedSnapshot is a purchase a snapshot could not build the event of
// (a poison purchase: no targets, a value the contract does not know).
type FailedSnapshot struct {
	PurchaseID uuid.UUID
	Err        error
}

// SnapshotProgress is where a snapshot run stands; the last one is its
// result, the JSON line `pin promotion snapshot` prints.
type SnapshotProgress struct {
	// SnapshotID is the snapshot's id, every event's correlation_id.
	SnapshotID uuid.UUID `json:"snapshotId"`
	// Events is how many events this run (this process) wrote.
	Events int `json:"events"`
	// Failed is how many purchases this run could not write an event for.
	Failed int `json:"failed"`
	// SkippedUnknownID is how many purchases this run left out because
	// their last messageId is unknown (ADR 0012); each is listed on stderr.
	SkippedUnknownID int `json:"skippedUnknownId"`
	// SentDerivedID is how many of its events went under a derived id
	// (--send-derived-ids): a consumer that dedupes by messageId alone
	// counts each of them again.
	SentDerivedID int `json:"sentDerivedId"`
	// TotalEvents is how many events the snapshot wrote in all, the runs it
	// resumes included.
	TotalEvents int `json:"totalEvents"`
	// After is the last purchase done, where the snapshot is stored to stand.
	After uuid.UUID `json:"after,omitzero"`
	// Complete is false when the run stopped before the end.
	Complete bool `json:"complete"`
}

// SnapshotObserver is told how a snapshot run goes.
type SnapshotObserver interface {
	// Started is called once the snapshot is stored, before its first
	// batch: from then on `--snapshot-id` resumes it, whatever stops this run.
	Started(SnapshotProgress)
	// Progress is called about once a second while the run goes on.
	Progress(SnapshotProgress)
	// Failed is called for each purchase left out because its event
	// cannot be built.
	Failed(FailedSnapshot)
	// UnknownID is called for each purchase whose last messageId is
	// unknown, skipped or sent under a derived id.
	UnknownID(UnknownIDSnapshot)
}

// SnapshotCommand asks for a snapshot run.
type SnapshotCommand struct {
	// SnapshotID resumes the stored snapshot of that id, with its stored
	// filter and position; uuid.Nil starts a new one.
	SnapshotID uuid.UUID
	// Filter selects the purchases of a new snapshot. With SnapshotID, a
	// filter other than the zero one must be the snapshot's own.
	Filter SnapshotFilter
	// After is accepted only with SnapshotID, for the resume lines of
	// earlier versions; the stored position decides where the run resumes.
	After uuid.UUID
	// Rate is the events per second at most (DefaultSnapshotRate is the
	// command's default).
	Rate int
	// BatchSize bounds one transaction (DefaultSnapshotBatchSize is the
	// command's default).
	BatchSize int
	// SendDerivedIDs redelivers purchases whose last messageId is unknown
	// under an id derived from them instead of skipping them. It belongs
	// to the run, not the stored snapshot: a resume skips them unless
	// given it again.
	SendDerivedIDs bool
}

// Validate checks the command: a rate of at least one event a second, a
// batch size of 1 to MaxSnapshotBatchSize, a known target kind or none, no
// nil purchase id, and After only with SnapshotID.
func (c SnapshotCommand) Validate() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("%w: rate %d: must be at least 1 event a second", ErrInvalidSnapshot, c.Rate)
	case c.BatchSize <= 0 || c.BatchSize > MaxSnapshotBatchSize:
		return fmt.Errorf("%w: batch size %d: must be 1 to %d", ErrInvalidSnapshot, c.BatchSize, MaxSnapshotBatchSize)
	case c.Filter.TargetKind != "" && !c.Filter.TargetKind.IsValid():
		return fmt.Errorf("%w: unknown target kind %q (want one of %v)", ErrInvalidSnapshot, c.Filter.TargetKind, domain.TargetKinds)
	case slices.Contains(c.Filter.PurchaseIDs, uuid.Nil):
		return fmt.Errorf("%w: the nil UUID is no purchase", ErrInvalidSnapshot)
	case c.After != uuid.Nil && c.SnapshotID == uuid.Nil:
		return fmt.Errorf("%w: --after resumes a snapshot: it needs --snapshot-id", ErrInvalidSnapshot)
	}
	return nil
}

// sameFilter reports whether a and b select the same purchases.
func sameFilter(a, b SnapshotFilter) bool {
	sorted := func(ids []uuid.UUID) []uuid.UUID {
		out := slices.Clone(ids)
		slices.SortFunc(out, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
		return slices.Compact(out)
	}
	return a.TenantID == b.TenantID && a.TargetKind == b.TargetKind && a.IncludeEnded == b.IncludeEnded &&
		slices.Equal(sorted(a.PurchaseIDs), sorted(b.PurchaseIDs))
}

// SnapshotHandler redelivers purchases' last events (a snapshot run): batch
// by batch in id order, paced to the rate, until a batch comes back short.
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

// Handle runs the snapshot: a new one, or the stored one cmd.SnapshotID
// names from where it stands. A batch runs to its commit even when ctx is
// cancelled meanwhile; the run then stops before the next batch, and
// returns what it did with an error wrapping ErrSnapshotStopped. A store
// error ends the run too; the batches before it stay committed, and the
// snapshot resumes after the last of them.
func (h SnapshotHandler) Handle(ctx context.Context, cmd SnapshotCommand, obs SnapshotObserver) (SnapshotProgress, error) {
	if err := cmd.Validate(); err != nil {
		return SnapshotProgress{}, err
	}
	run, err := h.begin(ctx, cmd)
	if err != nil {
		return SnapshotProgress{}, err
	}
	res := SnapshotProgress{SnapshotID: run.ID, TotalEvents: run.Events, After: run.After, Complete: run.Complete}
	if run.Complete {
		return res, nil
	}
	obs.Started(res)
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
			SnapshotID: run.ID, Filter: run.Filter, After: res.After, Limit: limit, SendDerivedIDs: cmd.SendDerivedIDs,
		})
		if err != nil {
			return res, fmt.Errorf("snapshot %s after %s: %w", res.SnapshotID, res.After, err)
		}
		read += b.Read
		res.Events += b.Events
		res.TotalEvents += b.Events
		res.Failed += len(b.Failed)
		if b.Read > 0 {
			res.After = b.Last
		}
		for _, f := range b.Failed {
			obs.Failed(f)
		}
		for _, u := range b.Unknown {
			if u.Sent() {
				res.SentDerivedID++
			} else {
				res.SkippedUnknownID++
			}
			obs.UnknownID(u)
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

// begin stores a new snapshot, or loads the one cmd resumes and checks
// that a filter given with it is its own.
func (h SnapshotHandler) begin(ctx context.Context, cmd SnapshotCommand) (SnapshotRun, error) {
	if cmd.SnapshotID == uuid.Nil {
		id, err := h.newID()
		if err != nil {
			return SnapshotRun{}, fmt.Errorf("snapshot id: %w", err)
		}
		run := SnapshotRun{ID: id, Filter: cmd.Filter}
		if err := h.store.StartSnapshot(ctx, run); err != nil {
			return SnapshotRun{}, fmt.Errorf("start snapshot %s: %w", id, err)
		}
		return run, nil
	}
	run, err := h.store.Snapshot(ctx, cmd.SnapshotID)
	if err != nil {
		return SnapshotRun{}, err
	}
	if !sameFilter(cmd.Filter, SnapshotFilter{}) && !sameFilter(cmd.Filter, run.Filter) {
		return SnapshotRun{}, fmt.Errorf("%w: snapshot %s selects other purchases than the options given: resume it with --snapshot-id alone",
			ErrInvalidSnapshot, run.ID)
	}
	return run, nil
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
