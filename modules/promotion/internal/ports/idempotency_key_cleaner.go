package ports

import (
	"context"
	"log/slog"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/host"
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

// Run cleans once at start and then every interval until ctx is cancelled;
// a failed round is logged and retried at the next tick.
func (c *IdempotencyKeyCleaner) Run(ctx context.Context) error {
	return host.RunCleaner(ctx, c.interval, c.logger, "idempotency key retention", c.forget.Handle)
}
