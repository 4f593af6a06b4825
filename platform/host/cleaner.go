package host

import (
	"context"
	"log/slog"
	"time"
)

// RunCleaner is the loop of a housekeeping runner (a retention cleaner):
// it calls clean at once and then every interval until ctx is cancelled,
// then returns nil. A failed round is logged and tried again next time, so a
// database blip never restarts the runner. what names the work in the log
// ("outbox retention").
func RunCleaner(ctx context.Context, interval time.Duration, logger *slog.Logger, what string, clean func(context.Context) (int64, error)) error {
	for {
		n, err := clean(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			logger.WarnContext(ctx, what+" failed", "err", err)
		case n > 0:
			logger.InfoContext(ctx, what+" deleted old rows", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
