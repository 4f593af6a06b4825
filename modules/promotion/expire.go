package promotion

import (
	"context"
	"fmt"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
)

// ExpireResult is what one expiry cycle did, as `pin expire-promotions
// --once` prints it. Expired, SkippedLocked and Failed count the committed
// batches; Failed are the poison items, left Active for a later cycle.
type ExpireResult struct {
	RunID         string    `json:"runId"`
	AsOf          time.Time `json:"asOf"`
	Expired       int       `json:"expired"`
	SkippedLocked int       `json:"skippedLocked"`
	Failed        int       `json:"failed"`
	DurationMs    int64     `json:"durationMs"`
}

// expireJob is the expiry job's parts: the cycle, shared by the runner and
// ExpireOnce, and the runner.
type expireJob struct {
	cycle  *app.ExpirePromotionsHandler
	runner *ports.ExpireRunner
	cmd    app.ExpirePromotions
}

// newExpireJob builds the job from d (after New filled in its defaults),
// publishing to events. It registers the job's metrics on d.Registerer, so
// they are exported from the start. Zero values of d.Expire mean the defaults, except
// MaxBatchesPerCycle, where 0 means no limit within the cycle budget.
func newExpireJob(d Deps, events adapters.Publications) (*expireJob, error) {
	metrics, err := app.NewExpireMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	store, err := adapters.NewExpireRepository(d.DB, d.Outbox, events...)
	if err != nil {
		return nil, err
	}
	cycle, err := app.NewExpirePromotionsHandler(app.ExpireConfig{
		Store: store, Logger: d.Logger, Metrics: metrics, TracerProvider: d.TracerProvider, Now: d.Now,
	})
	if err != nil {
		return nil, err
	}
	cmd := app.ExpirePromotions{
		BatchSize:          d.Expire.BatchSize,
		MaxBatchesPerCycle: d.Expire.MaxBatchesPerCycle,
		Budget:             d.Expire.CycleBudget,
	}
	if cmd.BatchSize <= 0 {
		cmd.BatchSize = app.DefaultExpireBatchSize
	}
	if cmd.Budget <= 0 {
		cmd.Budget = app.DefaultExpireCycleBudget
	}
	runner, err := ports.NewExpireRunner(cycle, cmd, d.Expire.Interval, d.Logger)
	if err != nil {
		return nil, err
	}
	metrics.JobStarted(runner.Interval(), time.Now())
	return &expireJob{cycle: cycle, runner: runner, cmd: cmd}, nil
}

// ExpireOnce runs exactly one expiry cycle of one batch of at most
// batchSize purchases (the configured batch size when batchSize <= 0), for
// `pin expire-promotions --once`. Several processes may run it at once, and
// alongside `pin serve`: the row locks give each purchase to one of them.
//
// Poison items are not errors (they are counted in Failed); an
// infrastructure error is returned, with the batch rolled back. The cycle
// is bounded by the configured cycle budget; cancelling ctx does not cut a
// batch in half.
func (m *Module) ExpireOnce(ctx context.Context, batchSize int) (ExpireResult, error) {
	cmd := m.expire.cmd
	cmd.MaxBatchesPerCycle = 1
	if batchSize > 0 {
		cmd.BatchSize = batchSize
	}
	res, err := m.expire.cycle.Handle(ctx, cmd)
	out := ExpireResult{
		RunID:         res.RunID.String(),
		AsOf:          res.AsOf,
		Expired:       res.Expired,
		SkippedLocked: res.SkippedLocked,
		Failed:        res.Failed,
		DurationMs:    res.Duration.Milliseconds(),
	}
	if err != nil {
		return out, fmt.Errorf("promotion: %w", err)
	}
	return out, nil
}
