package ports

import (
	"context"
	"log/slog"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// expireLogs writes the expiry cycle's log lines (the design document's
// Logs row). The run id comes from the context (run_id).
type expireLogs struct {
	logger *slog.Logger
}

func (l expireLogs) cycleStarted(ctx context.Context, c app.ExpireCycleResult, s app.ExpireSettings) {
	l.logger.InfoContext(ctx, "cycle started", "as_of", c.AsOf, "batch_size", s.BatchSize)
}

// batchCommitted logs the batch's selection, then each purchase it
// expired, left out as poison, or dropped as changed by another writer.
func (l expireLogs) batchCommitted(ctx context.Context, b app.ExpireBatchResult) {
	l.logger.InfoContext(ctx, "batch selected", "count", b.Selected)
	for _, p := range b.Expired {
		l.logger.InfoContext(ctx, "promotion expired",
			"purchase_id", p.ID(), "tenant_id", p.TenantID(),
			"package_kind", string(p.PackageKind()), "targets_count", len(p.Targets()))
	}
	for _, f := range b.Failed {
		l.logger.ErrorContext(ctx, "item failed", "purchase_id", f.PurchaseID, "error", f.Err)
	}
	for _, s := range b.Superseded {
		l.logger.DebugContext(ctx, "item dropped: changed by another writer",
			"purchase_id", s.PurchaseID, "status", string(s.Status), "version", s.Version)
	}
}

func (l expireLogs) cycleCompleted(ctx context.Context, c app.ExpireCycleResult) {
	l.logger.InfoContext(ctx, "cycle completed",
		"expired", c.Expired, "skipped_locked", c.SkippedLocked, "failed", c.Failed,
		"duration_ms", c.Duration.Milliseconds(), "batches", c.Batches)
}

func (l expireLogs) cycleFailed(ctx context.Context, c app.ExpireCycleResult, err error) {
	l.logger.ErrorContext(ctx, "cycle failed", "error", err,
		"expired", c.Expired, "skipped_locked", c.SkippedLocked, "failed", c.Failed,
		"duration_ms", c.Duration.Milliseconds())
}
