// Package telemetry is the expiry job's logs, metrics and spans: the
// expiry.ExpireObserver the module wires into the cycle, and the metrics
// its SLO and alerts read (docs/expire-promotions-job.md).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/observability"
)

// ExpireTelemetryDeps are what the expiry cycle's telemetry is built from.
type ExpireTelemetryDeps struct {
	Logger *slog.Logger
	// Registerer exports the metrics; with nil they are kept but not
	// exported.
	Registerer prometheus.Registerer
	// TracerProvider may be nil (no spans).
	TracerProvider trace.TracerProvider
}

// ExpireTelemetry is the expiry.ExpireObserver that writes the spans, log lines
// and metrics the design document names for the expiry cycle. The metric
// names are fixed: the dashboard and the alerts use them.
type ExpireTelemetry struct {
	logger     *slog.Logger
	tracer     trace.Tracer
	runs       prometheus.Counter
	duration   prometheus.Histogram
	items      *prometheus.CounterVec // by outcome: expired, failed
	interval   prometheus.Gauge
	completed  prometheus.Gauge
	backlog    prometheus.Gauge
	poison     prometheus.Gauge
	skipLocked prometheus.Counter
	errors     prometheus.Counter
}

var _ expiry.ExpireObserver = (*ExpireTelemetry)(nil)

// tracerName names the spans of the promotion module.
const tracerName = "github.com/pinmarket/pin/modules/promotion"

// NewExpireTelemetry builds the telemetry and registers its metrics, so
// they are exported from the start with zero values (both outcomes of
// promotion_expire_items_total included): an alert on "no increase" needs
// a series that exists.
func NewExpireTelemetry(d ExpireTelemetryDeps) (*ExpireTelemetry, error) {
	if d.Logger == nil {
		return nil, errors.New("ports: expire telemetry needs a logger")
	}
	tp := d.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	t := &ExpireTelemetry{
		logger: d.Logger,
		tracer: tp.Tracer(tracerName),
		runs: prometheus.NewCounter(prometheus.CounterOpts{Name: "promotion_expire_run_total",
			Help: "Expiry cycles run, whatever their outcome (liveness of the expire-promotions runner)."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "promotion_expire_cycle_duration_seconds",
			Help:    "Duration of one expiry cycle.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "promotion_expire_items_total",
			Help: "Purchases handled by the expiry cycles, by outcome: expired (committed) or failed (poison, left Active)."},
			[]string{"outcome"}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{Name: "promotion_expire_interval_seconds",
			Help: "The expiry runner's configured interval (PIN_EXPIRE_INTERVAL); the not-running alert allows two of them."}),
		completed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "promotion_expire_last_completed_timestamp_seconds",
			Help: "Unix time of the last expiry cycle that completed without an infrastructure error; the runner's start until one has."}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "promotion_expire_backlog",
			Help: "Due Active purchases the last cycle left, known poison not included: work still to do."}),
		poison: prometheus.NewGauge(prometheus.GaugeOpts{Name: "promotion_expire_poison_purchases",
			Help: "Active purchases the expiry cycles failed to expire and retry in the place each batch keeps for them (promotion.expire_poison), as the last cycle counted them."}),
		skipLocked: prometheus.NewCounter(prometheus.CounterOpts{Name: "promotion_expire_skip_locked_total",
			Help: "Due purchases a batch passed over because another transaction held their rows."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "promotion_expire_errors_total",
			Help: "Errors of the expiry cycles: poison items and infrastructure errors."}),
	}
	t.items.WithLabelValues("expired")
	t.items.WithLabelValues("failed")
	if d.Registerer == nil {
		return t, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{t.runs, t.duration, t.items, t.backlog, t.poison, t.interval, t.completed, t.skipLocked, t.errors} {
		errs = append(errs, d.Registerer.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("expire metrics: register: %w", err)
	}
	return t, nil
}

// RunnerStarted records the runner's interval and takes now as the last
// completion, so the not-running alert gives a new instance two intervals
// for its first cycle, and fires if it never completes one.
func (t *ExpireTelemetry) RunnerStarted(interval time.Duration, now time.Time) {
	t.interval.Set(interval.Seconds())
	t.completed.Set(float64(now.UnixNano()) / 1e9)
}

// Cycle implements expiry.ExpireObserver. The span starts first and ends last,
// so the log lines and the duration's exemplar carry its trace.
func (t *ExpireTelemetry) Cycle(ctx context.Context, c expiry.ExpireCycleResult, s expiry.ExpireSettings) (context.Context, func(expiry.ExpireCycleResult, error)) {
	ctx, span := t.tracer.Start(ctx, "expire-promotions.cycle", trace.WithAttributes(
		attribute.String("pin.run_id", c.RunID.String()),
		attribute.String("pin.correlation_id", c.RunID.String()),
		attribute.String("pin.expire.as_of", c.AsOf.Format(time.RFC3339Nano)),
		attribute.Int("pin.expire.batch_size", s.BatchSize),
	))
	t.logger.InfoContext(ctx, "cycle started", "as_of", c.AsOf, "batch_size", s.BatchSize)
	return ctx, func(c expiry.ExpireCycleResult, err error) {
		defer span.End()
		span.SetAttributes(attribute.Int("pin.expire.batches", c.Batches), attribute.Int("pin.expire.expired", c.Expired),
			attribute.Int("pin.expire.skipped_locked", c.SkippedLocked), attribute.Int("pin.expire.failed", c.Failed))
		counts := []any{"expired", c.Expired, "skipped_locked", c.SkippedLocked, "failed", c.Failed,
			"duration_ms", c.Duration.Milliseconds(), "batches", c.Batches}
		t.runs.Inc()
		observability.Observe(ctx, t.duration, c.Duration.Seconds())
		if c.Backlog != nil {
			t.backlog.Set(float64(c.Backlog.Due))
			t.poison.Set(float64(c.Backlog.Poison))
		}
		if err != nil {
			t.logger.ErrorContext(ctx, "cycle failed", append([]any{"error", err}, counts...)...)
			t.errors.Inc()
			span.RecordError(err)
			span.SetStatus(codes.Error, "expiry cycle failed")
			return
		}
		t.logger.InfoContext(ctx, "cycle completed", counts...)
		t.completed.SetToCurrentTime() // wall clock: the alert compares it with time()
	}
}

// Batch implements expiry.ExpireObserver: a span per batch, under which the
// outbox publication's span nests; a committed batch logs its selection
// and each purchase it expired, left out as poison, or dropped as changed
// by another writer (counted with the skipped ones).
func (t *ExpireTelemetry) Batch(ctx context.Context, limit int) (context.Context, func(expiry.ExpireBatchResult, error)) {
	ctx, span := t.tracer.Start(ctx, "expire-promotions.batch", trace.WithAttributes(
		attribute.String("pin.run_id", correlation.RunID(ctx)),
		attribute.Int("pin.expire.limit", limit),
	))
	return ctx, func(b expiry.ExpireBatchResult, err error) {
		defer span.End()
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "expiry batch rolled back")
			return
		}
		t.logger.InfoContext(ctx, "batch selected", "count", b.Selected)
		tenants := make([]string, 0, len(b.Expired))
		for _, p := range b.Expired {
			t.logger.InfoContext(ctx, "promotion expired", "purchase_id", p.ID(), "tenant_id", p.TenantID(),
				"package_kind", string(p.PackageKind()), "targets_count", len(p.Targets()))
			span.AddEvent("promotion expired", trace.WithAttributes(
				attribute.String("pin.purchase_id", p.ID().String()), attribute.String("pin.tenant_id", p.TenantID().String())))
			tenants = append(tenants, p.TenantID().String())
		}
		for _, f := range b.Failed {
			t.logger.ErrorContext(ctx, "item failed", "purchase_id", f.PurchaseID, "error", f.Err)
			span.AddEvent("item failed", trace.WithAttributes(
				attribute.String("pin.purchase_id", f.PurchaseID.String()), attribute.String("exception.message", f.Err.Error())))
		}
		for _, s := range b.Superseded {
			t.logger.DebugContext(ctx, "item dropped: changed by another writer",
				"purchase_id", s.PurchaseID, "status", string(s.Status), "version", s.Version)
		}
		t.items.WithLabelValues("expired").Add(float64(len(b.Expired)))
		t.items.WithLabelValues("failed").Add(float64(len(b.Failed)))
		t.skipLocked.Add(float64(b.SkippedLocked + len(b.Superseded)))
		t.errors.Add(float64(len(b.Failed)))
		slices.Sort(tenants)
		span.SetAttributes(attribute.Int("pin.expire.selected", b.Selected), attribute.Int("pin.expire.expired", len(b.Expired)),
			attribute.Int("pin.expire.failed", len(b.Failed)), attribute.Int("pin.expire.skipped_locked", b.SkippedLocked),
			attribute.StringSlice("pin.tenant_ids", slices.Compact(tenants)))
	}
}
