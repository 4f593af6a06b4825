package ports_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
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

func (f *fakeCycle) Handle(ctx context.Context, _ app.ExpirePromotions) (app.ExpireResult, error) {
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
	return app.ExpireResult{}, nil
}

func (f *fakeCycle) snapshot() (starts, ends []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.starts...), append([]time.Time(nil), f.ends...)
}

// waitUntil polls cond every few milliseconds until it holds, failing tb
// after timeout.
func waitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runningRunner is a runner started by startRunner.
type runningRunner struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startRunner runs r until the test ends or stop is called.
func startRunner(tb testing.TB, r *ports.ExpireRunner) *runningRunner {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRunner{cancel: cancel, done: make(chan struct{})}
	go func() {
		rr.err = r.Run(ctx)
		close(rr.done)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-rr.done:
		case <-time.After(30 * time.Second):
			tb.Errorf("runner did not stop")
		}
	})
	return rr
}

// returned reports whether Run returned within d.
func (rr *runningRunner) returned(d time.Duration) bool {
	select {
	case <-rr.done:
		return true
	case <-time.After(d):
		return false
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestExpireRunnerName(t *testing.T) {
	t.Parallel()
	r, err := ports.NewExpireRunner(&fakeCycle{}, app.ExpirePromotions{}, 0, discardLogger())
	require.NoError(t, err)
	require.Equal(t, "expire-promotions", r.Name())
}

// The first cycle runs right at start, not one interval later.
func TestExpireRunnerFirstCycleAtStart(t *testing.T) {
	t.Parallel()
	cycle := &fakeCycle{}
	r, err := ports.NewExpireRunner(cycle, app.ExpirePromotions{}, time.Hour, discardLogger())
	require.NoError(t, err)
	rr := startRunner(t, r)
	waitUntil(t, 5*time.Second, "the first cycle", func() bool { s, _ := cycle.snapshot(); return len(s) == 1 })
	rr.cancel()
	require.True(t, rr.returned(5*time.Second))
	require.NoError(t, rr.err)
	starts, _ := cycle.snapshot()
	require.Len(t, starts, 1)
}

// Ticks that fall while a cycle overruns the interval are skipped, not
// queued: after a cycle of 2.25 intervals the next cycle waits for the
// next tick on the grid (3 intervals after the start) instead of starting
// at once, and cycles never overlap.
func TestExpireRunnerSkipsTicksMissedDuringOverrun(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	cycle := &fakeCycle{durations: []time.Duration{interval*9/4 + 0, 0}}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	r, err := ports.NewExpireRunner(cycle, app.ExpirePromotions{}, interval, logger)
	require.NoError(t, err)
	rr := startRunner(t, r)
	waitUntil(t, 10*time.Second, "three cycles", func() bool { s, _ := cycle.snapshot(); return len(s) >= 3 })
	rr.cancel()
	require.True(t, rr.returned(5*time.Second))
	require.NoError(t, rr.err)

	starts, ends := cycle.snapshot()
	require.False(t, cycle.overlap.Load(), "cycles overlapped")
	// A queued tick would start cycle 2 right when cycle 1 ends; a skipped
	// one makes it wait for the tick at 3 intervals.
	gap := starts[1].Sub(ends[0])
	require.GreaterOrEqual(t, gap, interval/4, "cycle 2 started %s after cycle 1 ended: a missed tick was queued", gap)
	require.GreaterOrEqual(t, starts[1].Sub(starts[0]), 3*interval-10*time.Millisecond)
	// After the overrun the schedule is the plain grid again.
	require.GreaterOrEqual(t, starts[2].Sub(starts[1]), interval/2)
	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logs.String(), "missed ticks skipped")
	require.Equal(t, 1, strings.Count(logs.String(), "missed ticks skipped"))
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// On stop, Run returns only after the cycle in flight has finished, and the
// cycle sees the cancelled context (it finishes its batch whole under
// context.WithoutCancel; see the adapters' tests).
func TestExpireRunnerWaitsForCycleInFlight(t *testing.T) {
	t.Parallel()
	cycle := &fakeCycle{block: make(chan struct{})}
	r, err := ports.NewExpireRunner(cycle, app.ExpirePromotions{}, time.Hour, discardLogger())
	require.NoError(t, err)
	rr := startRunner(t, r)
	waitUntil(t, 5*time.Second, "a cycle in flight", func() bool { s, _ := cycle.snapshot(); return len(s) == 1 })

	rr.cancel()
	require.False(t, rr.returned(100*time.Millisecond), "Run returned while a cycle was in flight")
	close(cycle.block)
	require.True(t, rr.returned(5*time.Second), "Run did not return after the cycle finished")
	require.NoError(t, rr.err)
	_, ends := cycle.snapshot()
	require.Len(t, ends, 1)
	require.Error(t, cycle.ctxs[0].Err(), "the cycle got the runner's context")
}

func TestNewExpireRunnerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := ports.NewExpireRunner(nil, app.ExpirePromotions{}, time.Second, discardLogger())
	require.Error(t, err)
	_, err = ports.NewExpireRunner(&fakeCycle{}, app.ExpirePromotions{}, -time.Second, discardLogger())
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
		r, err := ports.NewExpireRunner(cycle, app.ExpirePromotions{}, 0, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(5*ports.DefaultExpireInterval + time.Second)
		cancel()
		require.NoError(t, <-done)
		require.Len(t, starts, 6, "one cycle at start, then one per interval")
		for i := 1; i < len(starts); i++ {
			require.Equal(t, ports.DefaultExpireInterval, starts[i].Sub(starts[i-1]))
		}
	})
}

// cycleFunc is a ports.ExpireCycle made of a function.
type cycleFunc func(context.Context)

// Handle implements ports.ExpireCycle.
func (f cycleFunc) Handle(ctx context.Context, _ app.ExpirePromotions) (app.ExpireResult, error) {
	f(ctx)
	return app.ExpireResult{}, nil
}
