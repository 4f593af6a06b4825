package expiry_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/testbed"
)

// fakeCycle records when cycles run; each call takes what durations says
// (the last value repeats). It is the only fake here: these tests are about
// the schedule, not the database.
type fakeCycle struct {
	mu        sync.Mutex
	durations []time.Duration
	starts    []time.Time
	ends      []time.Time
	running   atomic.Int32
	overlap   atomic.Bool
	block     chan struct{} // when not nil, each cycle waits on it
	ctxs      []context.Context
}

func (f *fakeCycle) Run(ctx context.Context, _ expiry.ExpireSettings) (expiry.ExpireCycleResult, error) {
	if f.running.Add(1) > 1 {
		f.overlap.Store(true)
	}
	defer f.running.Add(-1)
	f.mu.Lock()
	n := len(f.starts)
	f.starts = append(f.starts, time.Now())
	f.ctxs = append(f.ctxs, ctx)
	d := time.Duration(0)
	if len(f.durations) > 0 {
		d = f.durations[min(n, len(f.durations)-1)]
	}
	block := f.block
	f.mu.Unlock()
	time.Sleep(d) // the cycle's work: time passing is the point of the test
	if block != nil {
		<-block
	}
	f.mu.Lock()
	f.ends = append(f.ends, time.Now())
	f.mu.Unlock()
	return expiry.ExpireCycleResult{}, nil
}

func (f *fakeCycle) snapshot() (starts, ends []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.starts...), append([]time.Time(nil), f.ends...)
}

// startsSince returns when the cycles started, as offsets from t0.
func (f *fakeCycle) startsSince(t0 time.Time) []time.Duration {
	starts, _ := f.snapshot()
	out := make([]time.Duration, len(starts))
	for i, s := range starts {
		out[i] = s.Sub(t0)
	}
	return out
}

// stopInBackground calls stop, which returns once Run has, in a goroutine;
// the channel closes then, so a test can see that Run still waits.
func stopInBackground(stop func()) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	return stopped
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestExpireRunnerName(t *testing.T) {
	t.Parallel()
	r, err := expiry.NewExpireRunner(&fakeCycle{}, promotiontest.ExpireSettings(expiry.ExpireSettings{}), discardLogger())
	require.NoError(t, err)
	require.Equal(t, "expire-promotions", r.Name())
}

// The first cycle runs right at start, not one interval later.
func TestExpireRunnerFirstCycleAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cycle := &fakeCycle{}
		r, err := expiry.NewExpireRunner(cycle, promotiontest.ExpireSettings(expiry.ExpireSettings{Interval: time.Hour}), discardLogger())
		require.NoError(t, err)
		t0 := time.Now()
		stop := testbed.StartRunner(t, r)
		synctest.Wait()
		stop()
		require.Equal(t, []time.Duration{0}, cycle.startsSince(t0))
	})
}

// Ticks that fall while a cycle overruns the interval are skipped, not
// queued: after a cycle of 2.25 intervals the next cycle starts on the
// next tick of the grid (3 intervals after the start), not at once, and
// cycles never overlap.
func TestExpireRunnerSkipsTicksMissedDuringOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		cycle := &fakeCycle{durations: []time.Duration{interval * 9 / 4, 0}}
		logs := &testbed.LogBuffer{}
		r, err := expiry.NewExpireRunner(cycle, promotiontest.ExpireSettings(expiry.ExpireSettings{Interval: interval}), slog.New(slog.NewJSONHandler(logs, nil)))
		require.NoError(t, err)
		t0 := time.Now()
		stop := testbed.StartRunner(t, r)
		time.Sleep(4*interval + time.Second)
		stop()

		require.False(t, cycle.overlap.Load(), "cycles overlapped")
		require.Equal(t, []time.Duration{0, 3 * interval, 4 * interval}, cycle.startsSince(t0),
			"a queued tick would start cycle 2 at 2.25 intervals")
		skipped := logs.Records(t, "cycle overran the interval; missed ticks skipped")
		require.Len(t, skipped, 1)
		require.EqualValues(t, 2, skipped[0]["skipped_ticks"])
	})
}

// On stop, Run returns only after the cycle in flight has finished, and the
// cycle sees the cancelled context (it finishes its batch whole under
// context.WithoutCancel; see the adapters' tests).
func TestExpireRunnerWaitsForCycleInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cycle := &fakeCycle{block: make(chan struct{})}
		r, err := expiry.NewExpireRunner(cycle, promotiontest.ExpireSettings(expiry.ExpireSettings{Interval: time.Hour}), discardLogger())
		require.NoError(t, err)
		stop := testbed.StartRunner(t, r)
		synctest.Wait() // the first cycle is in flight, blocked
		stopped := stopInBackground(stop)
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Run returned while a cycle was in flight")
		default:
		}
		close(cycle.block)
		<-stopped
		_, ends := cycle.snapshot()
		require.Len(t, ends, 1)
		require.Error(t, cycle.ctxs[0].Err(), "the cycle got the runner's context")
	})
}

func TestNewExpireRunnerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := expiry.NewExpireRunner(nil, promotiontest.ExpireSettings(expiry.ExpireSettings{Interval: time.Second}), discardLogger())
	require.Error(t, err)
	_, err = expiry.NewExpireRunner(&fakeCycle{}, expiry.ExpireSettings{Interval: -time.Second}, discardLogger())
	require.Error(t, err)
}

// SLO row of the Tests table, the runner's half: at the 60 s default, cycles
// start one interval apart (plus the previous cycle's duration at most), so a
// purchase with EndsAt = t is taken by a cycle at or before t + Interval +
// DurationCycle. Run in a synctest bubble: virtual time, no wall-clock
// tolerance.
func TestExpireRunnerTicksOneIntervalApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Time
		const cycleTook = 2 * time.Second
		cycle := cycleFunc(func(context.Context) {
			starts = append(starts, time.Now())
			time.Sleep(cycleTook)
		})
		r, err := expiry.NewExpireRunner(cycle, promotiontest.ExpireSettings(expiry.ExpireSettings{}), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		stop := testbed.StartRunner(t, r)
		time.Sleep(5*promotiontest.ExpireSettings(expiry.ExpireSettings{}).Interval + time.Second)
		stop()
		require.Len(t, starts, 6, "one cycle at start, then one per interval")
		for i := 1; i < len(starts); i++ {
			require.Equal(t, promotiontest.ExpireSettings(expiry.ExpireSettings{}).Interval, starts[i].Sub(starts[i-1]))
		}
	})
}

// cycleFunc is a expiry.CycleRunner made of a function.
type cycleFunc func(context.Context)

// Run implements expiry.CycleRunner.
func (f cycleFunc) Run(ctx context.Context, _ expiry.ExpireSettings) (expiry.ExpireCycleResult, error) {
	f(ctx)
	return expiry.ExpireCycleResult{}, nil
}
