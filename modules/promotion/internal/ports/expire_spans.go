package ports

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/correlation"
)

// expireSpans traces the expiry cycle: a cycle span, and under it a span
// per batch, under which the outbox publication's span nests.
type expireSpans struct {
	tracer trace.Tracer
}

func (s expireSpans) cycleStarted(ctx context.Context, c app.ExpireCycleResult, settings app.ExpireSettings) context.Context {
	ctx, _ = s.tracer.Start(ctx, "expire-promotions.cycle", trace.WithAttributes(
		attribute.String("pin.run_id", c.RunID.String()),
		attribute.String("pin.correlation_id", c.RunID.String()),
		attribute.String("pin.expire.as_of", c.AsOf.Format(time.RFC3339Nano)),
		attribute.Int("pin.expire.batch_size", settings.BatchSize),
	))
	return ctx
}

func (s expireSpans) batchStarted(ctx context.Context, limit int) context.Context {
	ctx, _ = s.tracer.Start(ctx, "expire-promotions.batch", trace.WithAttributes(
		attribute.String("pin.run_id", correlation.RunID(ctx)),
		attribute.Int("pin.expire.limit", limit),
	))
	return ctx
}

// batchCommitted records an event per expired and per failed purchase,
// the batch's counts and its tenants, and ends the batch span.
func (s expireSpans) batchCommitted(ctx context.Context, b app.ExpireBatchResult) {
	span := trace.SpanFromContext(ctx)
	defer span.End()
	tenants := make(map[string]struct{})
	for _, p := range b.Expired {
		tenants[p.TenantID().String()] = struct{}{}
		span.AddEvent("promotion expired", trace.WithAttributes(
			attribute.String("pin.purchase_id", p.ID().String()),
			attribute.String("pin.tenant_id", p.TenantID().String()),
		))
	}
	for _, f := range b.Failed {
		span.AddEvent("item failed", trace.WithAttributes(
			attribute.String("pin.purchase_id", f.PurchaseID.String()),
			attribute.String("exception.message", f.Err.Error()),
		))
	}
	tenantIDs := make([]string, 0, len(tenants))
	for id := range tenants {
		tenantIDs = append(tenantIDs, id)
	}
	span.SetAttributes(
		attribute.Int("pin.expire.selected", b.Selected),
		attribute.Int("pin.expire.expired", len(b.Expired)),
		attribute.Int("pin.expire.failed", len(b.Failed)),
		attribute.Int("pin.expire.skipped_locked", b.SkippedLocked),
		attribute.StringSlice("pin.tenant_ids", tenantIDs),
	)
}

func (s expireSpans) batchFailed(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	defer span.End()
	span.RecordError(err)
	span.SetStatus(codes.Error, "expiry batch rolled back")
}

// cycleDone records the cycle's counts, and err when it failed, and ends
// the cycle span.
func (s expireSpans) cycleDone(ctx context.Context, c app.ExpireCycleResult, err error) {
	span := trace.SpanFromContext(ctx)
	defer span.End()
	span.SetAttributes(
		attribute.Int("pin.expire.batches", c.Batches),
		attribute.Int("pin.expire.expired", c.Expired),
		attribute.Int("pin.expire.skipped_locked", c.SkippedLocked),
		attribute.Int("pin.expire.failed", c.Failed),
	)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "expiry cycle failed")
	}
}
