package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// envelopeID reads the message id out of the forwarder's envelope (its
// JSON layout is watermill's: {"destination_topic", "uuid", "payload",
// "metadata"}).
func envelopeID(payload []byte) (string, bool) {
	var env struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(payload, &env); err != nil || env.UUID == "" {
		return "", false
	}
	return env.UUID, true
}

// deadLetter stores msg (an enveloped outbox row) in the dead-letter table,
// in the subscriber's own transaction: the copy and the advance of the
// position past the row commit together.
func (f *Forwarder) deadLetter(msg *message.Message, topic string, cause error, attempts int) error {
	tx, ok := watermillsql.TxFromContext(msg.Context())
	if !ok {
		return errors.New("outbox: dead letter: no subscriber transaction in the message context")
	}
	var messageID any
	if id, ok := envelopeID(msg.Payload); ok {
		messageID = id
	}
	meta := maps.Clone(map[string]string(msg.Metadata))
	delete(meta, metaRowOffset)
	delete(meta, metaRowTransactionID)
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("outbox: dead letter: %w", err)
	}
	var payload any
	if json.Valid(msg.Payload) {
		payload = []byte(msg.Payload)
	}
	_, err = tx.ExecContext(msg.Context(),
		`INSERT INTO `+DeadLetterTable+`
			(topic, message_id, outbox_offset, outbox_transaction_id, payload, metadata, error, attempts)
		VALUES ($1, $2, $3, $4::text::xid8, $5, $6, $7, $8)`,
		topic, messageID, msg.Metadata.Get(metaRowOffset), msg.Metadata.Get(metaRowTransactionID),
		payload, metaJSON, cause.Error(), attempts)
	if err != nil {
		return fmt.Errorf("outbox: dead letter: %w", err)
	}
	return nil
}

// startForwardSpan starts the span of one forwarded message as a child of
// the publication that stored it (its traceparent metadata).
func startForwardSpan(msg *message.Message, tracer trace.Tracer, topic string) trace.Span {
	ctx := propagation.TraceContext{}.Extract(msg.Context(),
		propagation.MapCarrier{MetaTraceparent: msg.Metadata.Get(MetaTraceparent)})
	_, span := tracer.Start(ctx, "outbox forward "+topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.message.id", msg.UUID),
		))
	return span
}
