package contract

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
)

// Record is a Kafka record of Topic as a consumer receives it, in a form any
// client fills without this package importing it: franz-go's kgo.Record,
// Sarama's ConsumerMessage, or a watermill-kafka message (Headers =
// msg.Metadata, Value = msg.Payload, Key = kafka.MessageKeyFromCtx).
type Record struct {
	// Key is the record key: the purchase id as text.
	Key []byte
	// Headers are the record headers by name (message_id, event_type, …).
	Headers map[string]string
	// Value is the record value: the envelope's JSON.
	Value []byte
}

// ErrRecordMismatch marks a record whose key, message_id header and envelope
// disagree. Such a record is never applied: which of its ids is the real one
// cannot be known, so a consumer dead-letters it.
var ErrRecordMismatch = errors.New("contract: record key, headers and envelope disagree")

// ErrUnknownEventType marks a record of an event type other than EventType,
// named by its event_type header or its envelope. A consumer never applies
// it and dead-letters it: the topic carries this event alone, so another
// type is a producer's mistake or a change this consumer predates, and the
// record is kept for a replay (ADR 0016).
var ErrUnknownEventType = errors.New("contract: unknown event type")

// ErrOutOfBounds marks a record whose event breaks a bound of the contract
// (CheckBounds: 1 to 10 targets, a version of at least 1, the shape of an
// enum value…). It also wraps the *ValidationError that names each rule
// broken. A consumer dead-letters it: no revision of the contract writes it.
var ErrOutOfBounds = errors.New("contract: record outside the contract's bounds")

// DecodeRecord decodes a record of Topic into its envelope (see Decode for
// the compatibility rules; an event_type header naming another type is
// ErrUnknownEventType before the value is read) and checks that the record agrees with itself: the
// key equals aggregateId, aggregateId equals payload.purchaseId, and the
// message_id header is present and equals messageId. A record that breaks one
// of these is an error wrapping ErrRecordMismatch; an event outside the
// contract's bounds (CheckBounds) is an error wrapping ErrOutOfBounds and the
// *ValidationError; an undecodable value is an error of Decode. A nil logger
// means slog.Default().
func DecodeRecord(r Record, logger *slog.Logger) (Envelope, error) {
	if t, ok := r.Headers[HeaderEventType]; ok && t != EventType {
		return Envelope{}, fmt.Errorf("contract.DecodeRecord: %w %q in the %s header", ErrUnknownEventType, t, HeaderEventType)
	}
	e, err := Decode(r.Value, logger)
	if err != nil {
		return Envelope{}, err
	}
	key, err := uuid.ParseBytes(r.Key)
	switch {
	case len(r.Key) == 0:
		return Envelope{}, fmt.Errorf("%w: record has no key", ErrRecordMismatch)
	case err != nil:
		return Envelope{}, fmt.Errorf("%w: key %q is not a UUID", ErrRecordMismatch, r.Key)
	case key != e.AggregateID:
		return Envelope{}, fmt.Errorf("%w: key %s, aggregateId %s", ErrRecordMismatch, key, e.AggregateID)
	case e.AggregateID != e.Payload.PurchaseID:
		return Envelope{}, fmt.Errorf("%w: aggregateId %s, payload.purchaseId %s", ErrRecordMismatch, e.AggregateID, e.Payload.PurchaseID)
	}
	header, ok := r.Headers[HeaderMessageID]
	if !ok {
		return Envelope{}, fmt.Errorf("%w: no %s header", ErrRecordMismatch, HeaderMessageID)
	}
	if id, err := uuid.Parse(header); err != nil || id != e.MessageID {
		return Envelope{}, fmt.Errorf("%w: %s header %q, messageId %s", ErrRecordMismatch, HeaderMessageID, header, e.MessageID)
	}
	if err := e.CheckBounds(); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrOutOfBounds, err)
	}
	return e, nil
}
