package expiry

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// ExpireRunnerName is the runner's name in logs and in
// pin_runner_restarts_total{runner}.
const ExpireRunnerName = "expire-promotions"

// CycleRunner runs one expiry cycle; *ExpireCycle is one.
type CycleRunner interface {
	Run(ctx context.Context, settings ExpireSettings) (ExpireCycleResult, error)
}

// ExpireRunner runs the expiry cycle in the background (a host.Runner): one
// cycle right at start, then one per interval tick. Cycles never overlap,
// and ticks missed while a cycle overran are skipped, not queued, so an
// overrun is not followed at once by another cycle; the next tick's cycle
// takes the backlog.
type ExpireRunner struct {
	cycle    CycleRunner
	settings ExpireSettings
	logger   *slog.Logger
}

// NewExpireRunner returns the runner of cycle, running a cycle with
// settings every settings.Interval.
func NewExpireRunner(cycle CycleRunner, settings ExpireSettings, logger *slog.Logger) (*ExpireRunner, error) {
	if cycle == nil || logger == nil {
		return nil, errors.New("ports: expire runner needs a cycle and a logger")
	}
	if settings.Interval <= 0 {
		return nil, errors.New("ports: expire runner: the interval must be positive")
	}
	return &ExpireRunner{cycle: cycle, settings: settings, logger: logger}, nil
}

// Interval is the time between the starts of two cycles.
func (r *ExpireRunner) Interval() time.Duration { return r.settings.Interval }

// Name implements host.Runner.
func (r *ExpireRunner) Name() string { return ExpireRunnerName }

// Run implements host.Runner. It returns nil once ctx is cancelled and the
// cycle in flight has finished: the cycle itself finishes its batch whole
// (commit or rollback) before returning. A failed cycle is logged by the
// cycle and retried at the next tick, not returned: a restart would not do
// better than the next tick.
func (r *ExpireRunner) Run(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	ticker := time.NewTicker(r.settings.Interval)
	defer ticker.Stop()
	for {
		started := time.Now()
		_, _ = r.cycle.Run(ctx, r.settings)
		if ctx.Err() != nil {
			return nil
		}
		r.skipMissedTicks(ctx, ticker, time.Since(started))
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// skipMissedTicks drops the tick that fired while an overrunning cycle ran
// (the ticker has dropped any others), so the overrun is not followed by an
// immediate catch-up cycle.
func (r *ExpireRunner) skipMissedTicks(ctx context.Context, ticker *time.Ticker, took time.Duration) {
	select {
	case <-ticker.C:
		r.logger.WarnContext(ctx, "cycle overran the interval; missed ticks skipped",
			"runner", ExpireRunnerName, "duration_ms", took.Milliseconds(),
			"interval_ms", r.settings.Interval.Milliseconds(), "skipped_ticks", max(int(took/r.settings.Interval), 1))
	default:
	}
}
