package relay

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
)

// startRoundSpan starts the span of a relay round that found rows, dated
// from the round's start, as the parent of the statements that follow the
// read (acknowledgement, dead letters). A round that finds nothing has no
// span: an idle relay polls many times a second. The begin and the read ran
// before the rows were known, so they have no spans of their own
// (docs/adr/0010-instrumentation.md).
func (r *Relay) startRoundSpan(ctx context.Context, topic string, start time.Time, rows int) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, "outbox relay "+topic,
		trace.WithNewRoot(),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String("messaging.destination.name", topic),
			attribute.Int("messaging.batch.message_count", rows),
		))
}

// endSpan ends span, marked failed with msg when err is set.
func endSpan(span trace.Span, err error, msg string) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, msg)
	}
	span.End()
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
