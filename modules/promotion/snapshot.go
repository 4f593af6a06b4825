package promotion

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// SnapshotOptions are what `pin promotion snapshot` asks for: which
// purchases (by default every Active one) and how fast, or which stored
// snapshot to resume.
type SnapshotOptions struct {
	// SnapshotID resumes the stored snapshot of that id, with its filter,
	// from where it stands; uuid.Nil starts a new one. A filter given with
	// it must be the snapshot's own.
	SnapshotID uuid.UUID
	// TenantID restricts the run to one tenant; uuid.Nil for all.
	TenantID uuid.UUID
	// PurchaseIDs restricts it to these purchases; none for all.
	PurchaseIDs []uuid.UUID
	// TargetKind restricts it to purchases with a target of this kind
	// (Project, PropertyObject, Post); empty for any.
	TargetKind string
	// IncludeEnded takes purchases of every status, not only Active ones.
	IncludeEnded bool
	// After is accepted with SnapshotID only, for the resume lines of
	// earlier versions: the stored position decides where a run resumes.
	After uuid.UUID
	// Rate is the events per second at most (DefaultSnapshotRate).
	Rate int
	// BatchSize is the purchases of one transaction at most
	// (DefaultSnapshotBatchSize).
	BatchSize int
	// SendDerivedIDs sends a purchase whose last messageId is unknown under
	// an id derived from it instead of skipping it: a consumer that dedupes
	// by messageId alone counts that record again (ADR 0012).
	SendDerivedIDs bool
}

// The snapshot's defaults and bound (docs/runbooks/consumer-current-state.md).
const (
	DefaultSnapshotRate      = app.DefaultSnapshotRate
	DefaultSnapshotBatchSize = app.DefaultSnapshotBatchSize
	MaxSnapshotBatchSize     = app.MaxSnapshotBatchSize
)

// SnapshotResult is where a snapshot run stands: its id, the events it
// wrote (and the snapshot in all), the purchases it left out, the last
// purchase done and whether it reached the end. It marshals to the JSON
// line the command prints.
type SnapshotResult = app.SnapshotProgress

// SnapshotObserver is told of a run's progress and of each purchase it
// leaves out.
type SnapshotObserver = app.SnapshotObserver

// FailedSnapshot is a purchase a snapshot wrote no event for.
type FailedSnapshot = app.FailedSnapshot

// UnknownIDSnapshot is a purchase whose last messageId is unknown, skipped
// or sent under a derived id; it marshals to the line listing it.
type UnknownIDSnapshot = app.UnknownIDSnapshot

// ErrInvalidSnapshot is wrapped by Check's error, and Snapshot's for the
// same options: nothing is written.
var ErrInvalidSnapshot = app.ErrInvalidSnapshot

// ErrSnapshotStopped is wrapped by Snapshot's error when ctx was cancelled
// before the end: every batch started committed; SnapshotID alone resumes it.
var ErrSnapshotStopped = app.ErrSnapshotStopped

// ErrSnapshotNotFound is wrapped by Snapshot's error when SnapshotID names
// no stored snapshot: nothing is written.
var ErrSnapshotNotFound = app.ErrSnapshotNotFound

// ErrSnapshotMovedOn is wrapped by Snapshot's error when another process
// resumed the same snapshot meanwhile: this run stops, the other goes on.
var ErrSnapshotMovedOn = app.ErrSnapshotMovedOn

// command is the use case's command for o.
func (o SnapshotOptions) command() app.SnapshotCommand {
	return app.SnapshotCommand{
		SnapshotID: o.SnapshotID,
		Filter: app.SnapshotFilter{
			TenantID: o.TenantID, PurchaseIDs: o.PurchaseIDs,
			TargetKind: domain.TargetKind(o.TargetKind), IncludeEnded: o.IncludeEnded,
		},
		After: o.After, Rate: o.Rate, BatchSize: o.BatchSize, SendDerivedIDs: o.SendDerivedIDs,
	}
}

// Check reports options Snapshot would refuse (an error wrapping
// ErrInvalidSnapshot), before a database is opened.
func (o SnapshotOptions) Check() error { return o.command().Validate() }

// Snapshot redelivers, through the outbox, the last published event of each
// purchase o selects: its messageId, occurredAt, version and payload, with
// event_origin "snapshot" and the snapshot's id as correlation_id
// (docs/adr/0012-purchase-snapshot.md). A purchase whose last messageId is
// unknown is skipped unless o.SendDerivedIDs. Its position is stored with every
// batch, so o.SnapshotID alone resumes it after any stop. It needs no
// Module: an operator's command has only the database.
func Snapshot(ctx context.Context, db *sql.DB, o SnapshotOptions, obs SnapshotObserver) (SnapshotResult, error) {
	publisher, err := outbox.NewPublisher(noop.NewTracerProvider())
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("promotion: snapshot: %w", err)
	}
	gdb, err := postgres.GORMOn(db)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("promotion: snapshot: %w", err)
	}
	store, err := adapters.NewSnapshotRepository(gdb, publisher, publications()...)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("promotion: snapshot: %w", err)
	}
	return app.NewSnapshotHandler(store, time.Now).Handle(ctx, o.command(), obs)
}
