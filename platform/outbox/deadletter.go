package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
)

// deadLetter is an outbox row the relay gives up on, with the last error.
type deadLetter struct {
	row      outboxRow
	err      error
	attempts int
}

// insertDeadLetter copies d's row, as it is, into the dead-letter table in
// the relay's transaction: the copy and the row's acknowledgement commit
// together.
func insertDeadLetter(ctx context.Context, tx *sql.Tx, topic string, d deadLetter) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO `+DeadLetterTable+` (topic, message_id, outbox_offset, payload, metadata, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		topic, d.row.msg.UUID, d.row.offset, []byte(d.row.msg.Payload), d.row.metadata, d.err.Error(), d.attempts)
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	return nil
}

// startForwardSpan starts the span of one relayed message as a child of
// the publication that stored it (its traceparent metadata).
func startForwardSpan(msg *message.Message, tracer trace.Tracer, topic string) trace.Span {
	ctx := propagation.TraceContext{}.Extract(msg.Context(),
		propagation.MapCarrier{kafka.MetaTraceparent: msg.Metadata.Get(kafka.MetaTraceparent)})
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
