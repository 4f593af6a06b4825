package ports

import (
	"context"
	"log/slog"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// IdempotencyKeyCleanerInterval is how often old idempotency keys are
// deleted. Keys only need to go eventually; hourly keeps the table at about
// a day of purchases.
const IdempotencyKeyCleanerInterval = time.Hour

// IdempotencyKeyCleaner is a host.Runner that deletes idempotency keys older
// than app.IdempotencyKeyRetention every interval. Several instances may run
// it at once: each DELETE takes whatever rows are left.
type IdempotencyKeyCleaner struct {
	forget   app.ForgetIdempotencyKeysHandler
	interval time.Duration
	logger   *slog.Logger
}

// NewIdempotencyKeyCleaner returns the runner.
func NewIdempotencyKeyCleaner(forget app.ForgetIdempotencyKeysHandler, interval time.Duration, logger *slog.Logger) *IdempotencyKeyCleaner {
	return &IdempotencyKeyCleaner{forget: forget, interval: interval, logger: logger}
}

// Name identifies the runner in logs and metrics.
func (c *IdempotencyKeyCleaner) Name() string { return "promotion-idempotency-key-cleaner" }

// Run cleans once at start and then every interval until ctx is cancelled.
// A failed round is logged and retried at the next tick: the keys can wait.
func (c *IdempotencyKeyCleaner) Run(ctx context.Context) error {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		n, err := c.forget.Handle(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.logger.WarnContext(ctx, "idempotency keys: cleanup failed", "error", err.Error())
		case n > 0:
			c.logger.InfoContext(ctx, "idempotency keys: deleted expired keys", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
