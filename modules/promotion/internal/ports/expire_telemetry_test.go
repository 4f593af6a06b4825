package ports_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// emptyStore has nothing due: a cycle over it runs one empty batch.
type emptyStore struct{}

func (emptyStore) ExpireBatch(context.Context, app.ExpireBatch) (app.ExpireBatchResult, error) {
	return app.ExpireBatchResult{}, nil
}

func (emptyStore) CountDue(context.Context, time.Time) (int, error) { return 0, nil }

func (emptyStore) CountPoison(context.Context) (int, error) { return 0, nil }

// TestExpireCycleDurationLinksToTheCycleTrace: the cycle's duration is
// observed with the cycle span's trace id as its exemplar.
func TestExpireCycleDurationLinksToTheCycleTrace(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	h := promotiontest.ExpireCycle(t, emptyStore{}, ports.ExpireTelemetryDeps{Registerer: reg, TracerProvider: tp})

	_, err := h.Run(context.Background(), app.ExpireSettings{}.WithDefaults())
	require.NoError(t, err)

	var cycleTrace string
	for _, s := range spans.Ended() {
		if s.Name() == "expire-promotions.cycle" {
			cycleTrace = s.SpanContext().TraceID().String()
		}
	}
	require.NotEmpty(t, cycleTrace, "no cycle span")
	var exemplars []string
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "promotion_expire_cycle_duration_seconds" {
			continue
		}
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			for _, l := range b.GetExemplar().GetLabel() {
				exemplars = append(exemplars, l.GetName()+"="+l.GetValue())
			}
		}
	}
	require.Equal(t, []string{"trace_id=" + cycleTrace}, exemplars)
}
