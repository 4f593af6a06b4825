package host_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/host"
)

type funcRunner struct {
	name string
	run  func(ctx context.Context) error
}

func (r funcRunner) Name() string                  { return r.name }
func (r funcRunner) Run(ctx context.Context) error { return r.run(ctx) }

func newHost(t *testing.T, cfg host.Config) (*host.Host, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := host.New(cfg, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	require.NoError(t, err)
	return h, reg
}

func TestRunnerPanicsAndErrorsAreRestarted(t *testing.T) {
	t.Parallel()
	h, reg := newHost(t, host.Config{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	var calls atomic.Int32
	h.AddRunner(funcRunner{"flaky", func(ctx context.Context) error {
		switch calls.Add(1) {
		case 1:
			panic("boom")
		case 2:
			return errors.New("db gone")
		}
		<-ctx.Done()
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	require.Eventually(t, func() bool { return calls.Load() >= 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 2.0, counterValue(t, reg, "pin_runner_restarts_total"))
	cancel()
	require.NoError(t, <-done, "a clean stop after runner failures still returns nil")
}

func TestStopWaitsForTheCycleInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t, host.Config{ShutdownTimeout: 5 * time.Second})
		const batch = time.Second
		started := make(chan struct{})
		var finished atomic.Bool
		h.AddRunner(funcRunner{"cycle", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(batch) // the cycle in flight finishes its batch
			finished.Store(true)
			return nil
		}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		<-started
		stopped := time.Now()
		cancel()
		require.NoError(t, <-done)
		require.True(t, finished.Load(), "Run returned before the runner finished")
		require.Equal(t, batch, time.Since(stopped), "Run returned when the runner did")
	})
}

func TestStopOverrunningTheTimeoutNamesWhatStillRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer // slog's handler serialises its writes
		h, err := host.New(host.Config{ShutdownTimeout: 30 * time.Second}, nil, nil,
			slog.New(slog.NewJSONHandler(&logs, nil)), prometheus.NewRegistry())
		require.NoError(t, err)
		release := make(chan struct{})
		h.AddRunner(funcRunner{"stuck", func(ctx context.Context) error {
			<-release
			return nil
		}})
		h.AddRunner(funcRunner{"quick", func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		stopped := time.Now()
		err = h.Run(ctx)
		close(release)
		require.Equal(t, 30*time.Second, time.Since(stopped), "Run gave up at the timeout")
		require.ErrorContains(t, err, "work still in flight after the 30s shutdown timeout: runner stuck")
		require.NotContains(t, err.Error(), "quick", "a runner that stopped is not named")
		require.Contains(t, logs.String(), `"msg":"stop overran the shutdown timeout"`)
		require.Contains(t, logs.String(), `"still_running":["runner stuck"]`)
		require.Contains(t, logs.String(), "goroutine ", "the log carries the goroutines' stacks")
	})
}

func TestServeFailureStopsTheHost(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h, err := host.New(host.Config{}, nil, func(ctx context.Context) error {
		return errors.New("address in use")
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	require.NoError(t, err)
	require.ErrorContains(t, h.Run(context.Background()), "address in use")
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var total float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestReadinessFailsFromTheStopSignalThroughTheDrain: /readyz's function
// reports "shutting_down" the moment ctx ends, while the HTTP server keeps
// serving for DrainDelay; only then is it told to stop.
func TestReadinessFailsFromTheStopSignalThroughTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const drain = 5 * time.Second
		serveStopped := make(chan time.Time, 1)
		h, err := host.New(host.Config{DrainDelay: drain, ShutdownTimeout: time.Second}, nil, func(ctx context.Context) error {
			<-ctx.Done()
			serveStopped <- time.Now()
			return nil
		}, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		require.NoError(t, err)
		ready := h.ReadyUnlessDraining(func(context.Context) error { return nil })

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		synctest.Wait()
		require.NoError(t, ready(context.Background()), "ready while running")

		cancel()
		signalled := time.Now()
		synctest.Wait()
		err = ready(context.Background())
		require.Error(t, err, "not ready from the stop signal on")
		var reasoned interface{ ReadyReason() string }
		require.ErrorAs(t, err, &reasoned)
		require.Equal(t, "shutting_down", reasoned.ReadyReason())
		require.Empty(t, serveStopped, "the server still serves during the drain")

		require.NoError(t, <-done)
		require.Equal(t, drain, (<-serveStopped).Sub(signalled), "the server is stopped when the drain ends")
		require.Error(t, ready(context.Background()), "and stays not ready")
	})
}

func TestNoDrainDelayStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t, host.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		require.NoError(t, h.Run(ctx))
		require.Zero(t, time.Since(start))
	})
}
