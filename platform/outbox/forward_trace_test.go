package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestForwardSpanContinuesThePublicationTrace checks the relay's span
// per message: a child of the publication span carried in the row's
// traceparent (so the trace that made the change reaches Kafka), with the
// messaging attributes, and an error status for a message Kafka never takes.
func TestForwardSpanContinuesThePublicationTrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := outbox.NewPublisher(tp)
	require.NoError(t, err)

	ctx, useCase := tp.Tracer("test").Start(b.ctx, "use case")
	good := event(uuid.NewString(), 1)
	require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(ctx, pub, tx, topic, good)
	}))
	useCase.End()

	// A row without a partition key, written under a trace of its own as an
	// older release could have: the marshaler refuses it, and it is
	// dead-lettered after that one attempt.
	pctx, manual := tp.Tracer("test").Start(b.ctx, "manual insert")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(pctx, carrier)
	manual.End()
	poisonID := uuid.NewString()
	meta, err := json.Marshal(map[string]string{"partition_key": "", "traceparent": carrier.Get("traceparent")})
	require.NoError(t, err)
	insertRaw(t, b, poisonID, `{}`, string(meta))

	b.startTracedRelay(t, relay.Config{Brokers: brokers}, nil, tp)
	rec := newConsumer(t, brokers).until(t, 1)[0]
	waitFor(t, "the poison row to be dead-lettered", func() bool { _, _, dead := b.stats(t); return dead == 1 })

	forwardSpans := func(id string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			if s.Name() == "outbox forward "+topic && spanAttr(s, "messaging.message.id") == id {
				out = append(out, s)
			}
		}
		return out
	}
	// A span ends after the broker's acknowledgement, which the consumer may
	// see first.
	waitFor(t, "the forward spans to end", func() bool {
		return len(forwardSpans(good.UUID)) == 1 && len(forwardSpans(poisonID)) == 1
	})

	var publish sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "outbox publish "+topic {
			publish = s
		}
	}
	require.NotNil(t, publish)
	require.Equal(t, useCase.SpanContext().SpanID(), publish.Parent().SpanID())

	fwd := forwardSpans(good.UUID)[0]
	require.Equal(t, useCase.SpanContext().TraceID(), fwd.SpanContext().TraceID(), "the forward continues the use case's trace")
	require.Equal(t, publish.SpanContext().SpanID(), fwd.Parent().SpanID(), "the forward is a child of the publication")
	require.True(t, fwd.Parent().IsRemote(), "the parent came through the outbox row")
	require.Equal(t, trace.SpanKindProducer, fwd.SpanKind())
	require.Equal(t, codes.Unset, fwd.Status().Code)
	require.Equal(t, "kafka", spanAttr(fwd, "messaging.system"))
	require.Equal(t, topic, spanAttr(fwd, "messaging.destination.name"))

	// The record carries the publication's traceparent: same trace.
	recTrace := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": headers(rec)["traceparent"]}))
	require.True(t, recTrace.IsValid(), headers(rec))
	require.Equal(t, useCase.SpanContext().TraceID(), recTrace.TraceID())
	require.Equal(t, publish.SpanContext().SpanID(), recTrace.SpanID())

	for _, s := range forwardSpans(poisonID) {
		require.Equal(t, manual.SpanContext().TraceID(), s.SpanContext().TraceID())
		require.Equal(t, manual.SpanContext().SpanID(), s.Parent().SpanID())
		require.Equal(t, codes.Error, s.Status().Code, "the failed attempt is an error span")
		require.NotEmpty(t, s.Events(), "the error is recorded")
	}
}

// spanAttr is the string value of the attribute key on s ("" if absent).
func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}
