package ports

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// ExpireTelemetryDeps are what the expiry cycle's telemetry is built from.
type ExpireTelemetryDeps struct {
	Logger *slog.Logger
	// Registerer exports the metrics; with nil they are kept but not
	// exported.
	Registerer prometheus.Registerer
	// TracerProvider may be nil (no spans).
	TracerProvider trace.TracerProvider
	// Store counts the backlog and the poison purchases at scrape time.
	Store app.ExpireStore
	// Now is the clock those counts are taken as of; time.Now when nil.
	Now func() time.Time
}

// ExpireTelemetry reports an expiry cycle (app.ExpireObserver) three ways:
// spans (OpenTelemetry), logs (slog) and metrics (Prometheus), with the
// names the design document gives them.
type ExpireTelemetry struct {
	spans   expireSpans
	logs    expireLogs
	metrics *expireMetrics
}

var _ app.ExpireObserver = (*ExpireTelemetry)(nil)

// NewExpireTelemetry builds the telemetry and registers its metrics, so
// they are exported from the start with zero values.
func NewExpireTelemetry(d ExpireTelemetryDeps) (*ExpireTelemetry, error) {
	if d.Logger == nil || d.Store == nil {
		return nil, errors.New("ports: expire telemetry needs a logger and a store")
	}
	tp := d.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	metrics, err := newExpireMetrics(d.Registerer, d.Store, d.Now)
	if err != nil {
		return nil, err
	}
	return &ExpireTelemetry{
		spans: expireSpans{tracer: tp.Tracer(tracerName)}, logs: expireLogs{logger: d.Logger}, metrics: metrics,
	}, nil
}

// tracerName names the spans of the promotion module.
const tracerName = "github.com/pinmarket/pin/modules/promotion"

// RunnerStarted records the runner's interval and takes now as the last
// completion, so the not-running alert gives a new instance two intervals
// for its first cycle, and fires if it never completes one.
func (t *ExpireTelemetry) RunnerStarted(interval time.Duration, now time.Time) {
	t.metrics.runnerStarted(interval, now)
}

// The span starts first and ends last, so that the log lines and the
// duration's exemplar carry its trace.

// CycleStarted implements app.ExpireObserver.
func (t *ExpireTelemetry) CycleStarted(ctx context.Context, c app.ExpireCycleResult, s app.ExpireSettings) context.Context {
	ctx = t.spans.cycleStarted(ctx, c, s)
	t.logs.cycleStarted(ctx, c, s)
	return ctx
}

// BatchStarted implements app.ExpireObserver.
func (t *ExpireTelemetry) BatchStarted(ctx context.Context, limit int) context.Context {
	return t.spans.batchStarted(ctx, limit)
}

// BatchCommitted implements app.ExpireObserver.
func (t *ExpireTelemetry) BatchCommitted(ctx context.Context, b app.ExpireBatchResult) {
	t.logs.batchCommitted(ctx, b)
	t.metrics.batchCommitted(b)
	t.spans.batchCommitted(ctx, b)
}

// BatchFailed implements app.ExpireObserver.
func (t *ExpireTelemetry) BatchFailed(ctx context.Context, err error) {
	t.spans.batchFailed(ctx, err)
}

// CycleCompleted implements app.ExpireObserver.
func (t *ExpireTelemetry) CycleCompleted(ctx context.Context, c app.ExpireCycleResult) {
	t.logs.cycleCompleted(ctx, c)
	t.metrics.cycleDone(ctx, c.Duration, false, time.Now())
	t.spans.cycleDone(ctx, c, nil)
}

// CycleFailed implements app.ExpireObserver.
func (t *ExpireTelemetry) CycleFailed(ctx context.Context, c app.ExpireCycleResult, err error) {
	t.logs.cycleFailed(ctx, c, err)
	t.metrics.cycleDone(ctx, c.Duration, true, time.Now())
	t.spans.cycleDone(ctx, c, err)
}
