package promotiontest

import (
	"cmp"
	"log/slog"
	"sync"
	"testing"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/config"
)

// ExpireSettings fills s's zero Interval, BatchSize, CycleBudget and
// StopTimeout from platform/config's defaults as the module does
// (promotion.ExpireSettingsOf; a test there holds the two equal). A zero
// MaxBatchesPerCycle stays: it means no limit.
func ExpireSettings(s expiry.ExpireSettings) expiry.ExpireSettings {
	d := config.Defaults()
	s.Interval = cmp.Or(s.Interval, d.ExpireInterval)
	s.BatchSize = cmp.Or(s.BatchSize, d.ExpireBatchSize)
	s.CycleBudget = cmp.Or(s.CycleBudget, d.ExpireCycleBudget)
	s.StopTimeout = cmp.Or(s.StopTimeout, d.ShutdownTimeout/2)
	return s
}

// ExpireCycle builds the expiry cycle on store, reporting through the
// telemetry production uses (telemetry.ExpireTelemetry) built from d. A nil
// d.Logger discards the logs.
func ExpireCycle(tb testing.TB, store expiry.ExpireStore, d telemetry.ExpireTelemetryDeps) *expiry.ExpireCycle {
	tb.Helper()
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	telemetry, err := telemetry.NewExpireTelemetry(d)
	require.NoError(tb, err)
	cycle, err := expiry.NewExpireCycle(store, telemetry, nil)
	require.NoError(tb, err)
	return cycle
}

// ExpireRun runs one expiry cycle of one instance and says what
// it expired and what it skipped because another transaction held the row.
type ExpireRun func() (expired, skippedLocked int, err error)

// DrainConcurrently runs every instance in a goroutine of its own, over and
// over, until a cycle of it finds nothing to do (nothing expired, nothing
// skipped) — as instances of the runner on several machines would drain a
// backlog. It fails tb on any instance's error and returns the sums over
// all cycles.
func DrainConcurrently(tb testing.TB, instances ...ExpireRun) (expired, skippedLocked int) {
	tb.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(instances))
	for _, run := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, s, err := run()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				expired += e
				skippedLocked += s
				mu.Unlock()
				if e == 0 && s == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err)
	}
	return expired, skippedLocked
}

// ExpireBatches is the expiry batch's policy over storage, as the module
// wires it.
func ExpireBatches(tb testing.TB, storage expiry.ExpireBatchStorage) *expiry.ExpireBatches {
	tb.Helper()
	batches, err := expiry.NewExpireBatches(storage)
	require.NoError(tb, err)
	return batches
}
