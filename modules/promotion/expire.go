package promotion

import (
	"context"
	"fmt"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
)

// ExpireCycleResult is what one expiry cycle did; it marshals to the JSON
// line `pin expire-promotions --once` prints.
type ExpireCycleResult = app.ExpireCycleResult

// expireJob is the expiry job's parts: the cycle, shared by the runner and
// ExpireOnce, and the runner.
type expireJob struct {
	cycle    *app.ExpireCycle
	runner   *ports.ExpireRunner
	settings app.ExpireSettings
}

// newExpireJob builds the job from d, publishing to events. It registers
// the job's metrics on d.Registerer, so they are exported from the start.
// This is where the settings' defaults are applied.
func newExpireJob(d Deps, events adapters.Publications) (*expireJob, error) {
	store, err := adapters.NewExpireRepository(d.DB, d.Outbox, events...)
	if err != nil {
		return nil, err
	}
	telemetry, err := ports.NewExpireTelemetry(ports.ExpireTelemetryDeps{
		Logger: d.Logger, Registerer: d.Registerer, TracerProvider: d.TracerProvider, Store: store, Now: d.Now,
	})
	if err != nil {
		return nil, err
	}
	cycle, err := app.NewExpireCycle(store, telemetry, d.Now)
	if err != nil {
		return nil, err
	}
	settings := d.Expire.WithDefaults()
	runner, err := ports.NewExpireRunner(cycle, settings, d.Logger)
	if err != nil {
		return nil, err
	}
	telemetry.RunnerStarted(runner.Interval(), time.Now())
	return &expireJob{cycle: cycle, runner: runner, settings: settings}, nil
}

// ExpireOnce runs exactly one expiry cycle of one batch of at most
// batchSize purchases (the configured batch size when batchSize <= 0), for
// `pin expire-promotions --once`. Several processes may run it at once, and
// alongside `pin serve`: the row locks give each purchase to one of them.
//
// Poison items are not errors (they are counted in Failed); an
// infrastructure error is returned, with the batch rolled back and nothing
// remembered as poison. Neither the cycle budget nor cancelling ctx cuts
// the batch in half.
func (m *Module) ExpireOnce(ctx context.Context, batchSize int) (ExpireCycleResult, error) {
	settings := m.expire.settings
	settings.MaxBatchesPerCycle = 1
	if batchSize > 0 {
		settings.BatchSize = batchSize
	}
	res, err := m.expire.cycle.Run(ctx, settings)
	if err != nil {
		return res, fmt.Errorf("promotion: %w", err)
	}
	return res, nil
}
