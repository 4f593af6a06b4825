package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/testbed"
)

// spanNotingHandler is flakyHandler that notes the span each applied
// event's Apply ran under.
type spanNotingHandler struct {
	flakyHandler
	mu    sync.Mutex
	under map[string]trace.SpanContext // aggregate → span of its Apply
}

func (h *spanNotingHandler) Apply(ctx context.Context, tx *gorm.DB, events []consumer.Guarded[testEvent]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.under[e.AggregateID] = trace.SpanContextFromContext(ctx)
	}
	return tx.Exec(`SELECT 1`).Error // the projection's write, as far as tracing goes
}

// TestBatchSpanLinksEveryRecordsTraceparent: records produced under three
// traces, fetched together, are applied under consumer spans that link to
// each record's traceparent; a batch of one is its record's child; the
// handler and the kit's statements run under the batch's span.
func TestBatchSpanLinksEveryRecordsTraceparent(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, topic)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	// Produced before the runner starts, on one partition (one key), so
	// that the first fetch holds them all.
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	producers := map[trace.SpanID]trace.SpanContext{}
	for v := int64(1); v <= 3; v++ {
		ctx, span := tp.Tracer("producer").Start(context.Background(), "publish")
		span.End()
		producers[span.SpanContext().SpanID()] = span.SpanContext()
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		value, err := json.Marshal(testEvent{MessageID: uuid.New(), Aggregate: "a", Version: v})
		require.NoError(t, err)
		require.NoError(t, client.ProduceSync(context.Background(), &kgo.Record{
			Key: []byte("a"), Value: value, Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(carrier["traceparent"])}},
		}).FirstErr())
	}

	h := &spanNotingHandler{under: map[string]trace.SpanContext{}}
	r, err := consumer.NewRunner(db.Traced(t, tp), consumer.Config{Name: "kit-trace", Topic: topic, Brokers: brokers, TracerProvider: tp},
		h, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	testbed.StartRunner(t, r)

	var batches []sdktrace.ReadOnlySpan
	testbed.Eventually(t, func() error {
		batches = batches[:0]
		linked := 0
		for _, s := range spans.Ended() {
			if s.Name() == "consumer kit-trace process "+topic {
				batches = append(batches, s)
				linked += len(s.Links())
			}
		}
		if linked < len(producers) {
			return fmt.Errorf("%d of %d records' traces linked", linked, len(producers))
		}
		return nil
	})

	for _, b := range batches {
		require.Equal(t, trace.SpanKindConsumer, b.SpanKind())
		for _, l := range b.Links() {
			require.Equal(t, producers[l.SpanContext.SpanID()], l.SpanContext.WithRemote(false), "a link is a record's traceparent")
			delete(producers, l.SpanContext.SpanID())
		}
		if len(b.Links()) == 1 {
			require.Equal(t, b.Links()[0].SpanContext.SpanID(), b.Parent().SpanID(), "a batch of one is its record's child")
		} else {
			require.False(t, b.Parent().IsValid(), "a batch of several records starts a trace of its own")
		}
		var statements int
		for _, s := range testbed.DatabaseSpans(spans.Ended()) {
			if s.Parent().SpanID() == b.SpanContext().SpanID() {
				statements++
			}
		}
		require.GreaterOrEqual(t, statements, 3, "begin, the inbox and guard, the handler's statement... are the batch's children")
	}
	require.Empty(t, producers, "every record's trace is linked once")
	require.Contains(t, batchIDs(batches), h.under["a"].SpanID(), "the handler runs under a batch span")
}

func batchIDs(spans []sdktrace.ReadOnlySpan) []trace.SpanID {
	ids := make([]trace.SpanID, len(spans))
	for i, s := range spans {
		ids[i] = s.SpanContext().SpanID()
	}
	return ids
}
