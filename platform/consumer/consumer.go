// Package consumer is the platform's kit for consuming an integration event
// from Kafka with the guarantees the event contracts ask of a consumer:
//
//   - an inbox: the message id is recorded in the same database transaction
//     as the event's effect, so a re-delivered record is skipped;
//   - a version guard: the handler is told the last version applied for the
//     aggregate, and an event whose version is not above it is skipped;
//   - origins: each event says whether it is a transition or a snapshot
//     (origin.go); a snapshot passes the same guard, so one at a version
//     already applied changes nothing;
//   - dead letters: a record that cannot be decoded, or whose handler keeps
//     failing, is kept byte for byte in consumer.dead_letters and the
//     partition moves on; whatever a record holds, its dead letter can be
//     written (deadletter.go). A fault of the database is never a record's:
//     the batch rolls back and the runner restarts;
//   - skips: a record the handler declines (ErrSkip: on a topic that
//     carries several event types, one it does not handle) is counted and
//     passed over, neither applied nor dead-lettered;
//   - batches: the records a partition has already fetched are applied in
//     one transaction;
//   - offsets are marked only after the transaction committed, so a crash
//     loses nothing and re-delivers only what the inbox then skips.
//
// A module provides a Handler (decode a record, apply an event inside a
// transaction) and registers the Runner and the InboxCleaner with the host.
// docs/consuming-the-event.md shows the whole of it with the reference boost
// projection (modules/boost).
//
// This package is the kit a module imports. Its other rooms change for other
// reasons: package inbox is the inbox and version guard the runner asks,
// package deadletters the operators' list, replay and discard (over the
// administration the outbox shares, platform/deadletter), and internal/store
// holds every statement on the kit's tables, whole
// (docs/adr/0029-the-consumer-kit-in-rooms.md).
package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Record is one Kafka record as the runner received it.
type Record struct {
	// Topic, Partition and Offset say where the record is.
	Topic     string
	Partition int32
	Offset    int64
	// Key is the record key.
	Key []byte
	// Headers are the record headers by name (the last of a repeated name).
	Headers map[string]string
	// HeaderList is every header as it came, in order: what a dead letter
	// keeps.
	HeaderList []Header
	// Value is the record value.
	Value []byte
}

// Header is one record header, its bytes as they came (a nil Value is a
// null one).
type Header struct {
	Key, Value []byte
}

// ErrSkip, wrapped by an error of Handler.Decode, marks a record that is not
// for this consumer (on a topic that carries several event types, one it
// does not handle): it is counted and logged as skipped, never applied,
// dead-lettered nor put in the inbox. An event type a topic of one type
// should not carry is a dead letter instead (ADR 0016).
var ErrSkip = errors.New("consumer: record skipped")

// Event is a decoded record: what the kit needs to guard it, and the body
// the handler applies.
type Event[B any] struct {
	// MessageID is the inbox key: identical on every delivery of one event.
	MessageID uuid.UUID
	// AggregateID names the aggregate the version guard is kept for.
	AggregateID string
	// Version grows with every event of one aggregate.
	Version int64
	// OccurredAt is when the change happened at the producer; the delay
	// from it to the committed effect is measured.
	OccurredAt time.Time
	// Origin is set by the kit from the record's HeaderEventOrigin header
	// (Decode need not fill it): a transition or a snapshot.
	Origin Origin
	// Body is the event itself.
	Body B
}

// Guarded is an event that passed the inbox and the version guard, with the
// last version applied for its aggregate before it (0 for none; for the
// second event of one aggregate in a batch, the first one's version).
type Guarded[B any] struct {
	Event[B]
	LastVersion int64
}

// Handler is what a consuming module provides.
type Handler[B any] interface {
	// Decode turns a record into an event. An error means the record can
	// never be applied: it is dead-lettered at once, without retries, unless
	// it wraps ErrSkip, when the record is skipped.
	Decode(r Record) (Event[B], error)
	// Apply makes the effects of a transaction's events, in offset order,
	// inside tx, the transaction that also records their inbox entries and
	// new versions. Each event's Version is above its LastVersion, whatever
	// its Origin: a handler that only reacts to changes skips the snapshots
	// (their versions are recorded all the same). A handler may loop over
	// them or apply them as a set. An error rolls everything back, and the
	// events are then applied one per call (and transaction), retried, and
	// the failing one dead-lettered; but a fault of the
	// database (postgres.FaultOf: an SQLSTATE outside classes 22 and 23, or
	// the connection) is no record's, and makes Run return instead.
	Apply(ctx context.Context, tx *gorm.DB, events []Guarded[B]) error
}
