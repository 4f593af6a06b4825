package promotion

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/config"
)

// ExpireCycleResult is what one expiry cycle did; it marshals to the JSON
// line `pin expire-promotions --once` prints.
type ExpireCycleResult = expiry.ExpireCycleResult

// expiryJob is the module's expiry cycle, shared by its runner and
// ExpireOnce, with the runner and the settings they run it with.
type expiryJob struct {
	cycle    *expiry.ExpireCycle
	runner   *expiry.ExpireRunner
	settings expiry.ExpireSettings
}

// newExpiry builds the cycle and its runner from d, publishing to events.
// It registers the cycle's metrics on d.Registerer, so they are exported
// from the start.
// This is where the settings' zero fields take the config's defaults.
func newExpiry(d Deps, events adapters.Publications) (*expiryJob, error) {
	storage, err := adapters.NewExpireRepository(d.DB, d.Outbox, events...)
	if err != nil {
		return nil, err
	}
	store, err := expiry.NewExpireBatches(storage)
	if err != nil {
		return nil, err
	}
	telemetry, err := telemetry.NewExpireTelemetry(telemetry.ExpireTelemetryDeps{
		Logger: d.Logger, Registerer: d.Registerer, TracerProvider: d.TracerProvider,
	})
	if err != nil {
		return nil, err
	}
	cycle, err := expiry.NewExpireCycle(store, telemetry, d.Now)
	if err != nil {
		return nil, err
	}
	settings := withConfigDefaults(d.Expire)
	runner, err := expiry.NewExpireRunner(cycle, settings, d.Logger)
	if err != nil {
		return nil, err
	}
	telemetry.RunnerStarted(runner.Interval(), time.Now())
	return &expiryJob{cycle: cycle, runner: runner, settings: settings}, nil
}

// ExpireSettingsOf maps the configuration's PIN_EXPIRE_* variables to the
// expiry's settings; a stop lets the batch in flight run for half of
// PIN_SHUTDOWN_TIMEOUT, so it still rolls back and returns before the host
// gives up.
func ExpireSettingsOf(cfg config.Config) ExpireSettings {
	return ExpireSettings{
		Interval:           cfg.ExpireInterval,
		BatchSize:          cfg.ExpireBatchSize,
		MaxBatchesPerCycle: cfg.ExpireMaxBatchesPerCycle,
		CycleBudget:        cfg.ExpireCycleBudget,
		StopTimeout:        cfg.ShutdownTimeout / 2,
	}
}

// withConfigDefaults fills s's zero Interval, BatchSize, CycleBudget and
// StopTimeout from the configuration's defaults, the one place they are
// written. A zero MaxBatchesPerCycle stays: it means no limit.
func withConfigDefaults(s ExpireSettings) ExpireSettings {
	d := ExpireSettingsOf(config.Defaults())
	s.Interval = cmp.Or(s.Interval, d.Interval)
	s.BatchSize = cmp.Or(s.BatchSize, d.BatchSize)
	s.CycleBudget = cmp.Or(s.CycleBudget, d.CycleBudget)
	s.StopTimeout = cmp.Or(s.StopTimeout, d.StopTimeout)
	return s
}

// ExpireOnce runs exactly one expiry cycle of one batch of at most
// batchSize purchases (the configured batch size when batchSize <= 0), for
// `pin expire-promotions --once`. Several processes may run it at once, and
// alongside `pin serve`: the row locks give each purchase to one of them.
//
// Poison items are not errors (they are counted in Failed); an
// infrastructure error is returned, with the batch rolled back and nothing
// remembered as poison. Neither the cycle budget nor cancelling ctx cuts
// the batch in half: after a cancel it runs on for the settings'
// StopTimeout, then rolls back whole.
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
