package consumer

import (
	"context"
	"strconv"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
)

// instrumentation names the kit's tracer.
const instrumentation = "github.com/pinmarket/pin/platform/consumer"

// tracedBatch is processBatch inside the batch's span, whose context the
// statements and the handler's effects run under (each gets its own span).
func (r *Runner[B]) tracedBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) error {
	ctx, span := r.startBatchSpan(ctx, msgs)
	defer span.End()
	err := r.processBatch(ctx, msgs)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "batch not applied")
	}
	return err
}

// startBatchSpan starts the consumer span of one partition's batch, linked
// to the trace of each record's W3C traceparent (the contract's header),
// as the messaging conventions ask of batch processing. A batch of one
// record is also that record's child, so the common case is one trace from
// the producer's cause to the projection's write.
func (r *Runner[B]) startBatchSpan(ctx context.Context, msgs []*sarama.ConsumerMessage) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(msgs))
	var parent trace.SpanContext
	for _, m := range msgs {
		sc := producerSpan(m)
		if sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
		if len(msgs) == 1 {
			parent = sc
		}
	}
	tp := r.cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", r.cfg.Topic),
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(msgs[0].Partition))),
			attribute.String("messaging.consumer.group.name", r.cfg.Name),
			attribute.Int("messaging.batch.message_count", len(msgs)),
		),
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return tp.Tracer(instrumentation).Start(ctx, "consumer "+r.cfg.Name+" process "+r.cfg.Topic, opts...)
}

// producerSpan is the span context of m's traceparent header (invalid when
// it has none, or an unreadable one).
func producerSpan(m *sarama.ConsumerMessage) trace.SpanContext {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == kafka.MetaTraceparent {
			ctx := propagation.TraceContext{}.Extract(context.Background(),
				propagation.MapCarrier{kafka.MetaTraceparent: string(h.Value)})
			return trace.SpanContextFromContext(ctx)
		}
	}
	return trace.SpanContext{}
}
