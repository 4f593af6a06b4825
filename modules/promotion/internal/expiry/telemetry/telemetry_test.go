package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/testbed"
)

// emptyStore has nothing due: a cycle over it runs one empty batch, or
// fails it with err when set.
type emptyStore struct{ err error }

func (s emptyStore) ExpireBatch(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
	return expiry.ExpireBatchResult{}, s.err
}

func (emptyStore) CountBacklog(context.Context, time.Time) (expiry.ExpireBacklog, error) {
	return expiry.ExpireBacklog{}, nil
}

func (emptyStore) RecordCycle(context.Context, expiry.ExpireCycleResult, error) error { return nil }

// TestExpireCycleDurationLinksToTheCycleTrace: the cycle's duration is
// observed with the cycle span's trace id as its exemplar.
func TestExpireCycleDurationLinksToTheCycleTrace(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	h := promotiontest.ExpireCycle(t, emptyStore{}, telemetry.ExpireTelemetryDeps{Registerer: reg, TracerProvider: tp})

	_, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{}))
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

// TestExpireFailedCycleIsReportedOnce: a batch rolled back on a database
// fault ends both spans with an error status, logs cycle failed once with
// the run id, counts one error and one run, and leaves the last completion
// at the runner's start.
func TestExpireFailedCycleIsReportedOnce(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	logs := &testbed.LogBuffer{}
	boom := errors.New("connection reset")
	store := emptyStore{err: boom}
	telemetry, err := telemetry.NewExpireTelemetry(telemetry.ExpireTelemetryDeps{
		Logger: observability.NewLogger(logs, slog.LevelDebug), Registerer: reg, TracerProvider: tp,
	})
	require.NoError(t, err)
	started := time.Unix(1_700_000_000, 0)
	telemetry.RunnerStarted(time.Minute, started)
	cycle, err := expiry.NewExpireCycle(store, telemetry, nil)
	require.NoError(t, err)

	res, err := cycle.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{}))
	require.ErrorIs(t, err, boom)

	status := map[string]codes.Code{}
	for _, s := range spans.Ended() {
		status[s.Name()] = s.Status().Code
	}
	require.Equal(t, map[string]codes.Code{"expire-promotions.cycle": codes.Error, "expire-promotions.batch": codes.Error}, status)
	failed := logs.Records(t, "cycle failed")
	require.Len(t, failed, 1)
	require.Equal(t, res.RunID.String(), failed[0]["run_id"])
	require.Empty(t, logs.Records(t, "batch selected"), "a rolled-back batch selected nothing that stays")
	require.Empty(t, logs.Records(t, "cycle completed"))
	values := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		m := f.GetMetric()[0]
		values[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	require.Equal(t, 1.0, values["promotion_expire_errors_total"])
	require.Equal(t, 1.0, values["promotion_expire_run_total"])
	require.Equal(t, float64(started.Unix()), values["promotion_expire_last_completed_timestamp_seconds"])
}
