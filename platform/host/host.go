package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/backoff"
)

// Config tunes the host's lifecycle.
type Config struct {
	// ShutdownTimeout bounds how long in-flight requests and runner cycles
	// may take to finish after a stop signal.
	ShutdownTimeout time.Duration
	// DrainDelay is how long, after the stop signal, the host keeps serving
	// with ReadyUnlessDraining reporting not ready, before it stops taking
	// work: load balancers take the instance out while it still answers.
	DrainDelay time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed runner is
	// restarted; the wait doubles with each failure in a row, and a random
	// jitter (platform/backoff) takes up to half of it off.
	MinBackoff, MaxBackoff time.Duration
}

func (c Config) withDefaults() Config {
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = 30 * time.Second
	}
	return c
}

// ServeFunc runs the HTTP server until ctx is cancelled, then shuts it down
// gracefully and returns.
type ServeFunc func(ctx context.Context) error

// Host runs the HTTP server and every runner until its context is
// cancelled, then stops them all gracefully.
type Host struct {
	cfg      Config
	logger   *slog.Logger
	echo     *echo.Echo
	serve    ServeFunc
	runners  []Runner
	topics   []string
	restarts *prometheus.CounterVec
	failures *prometheus.CounterVec
	// draining is set from the stop signal on.
	draining atomic.Bool
}

// New builds a host around an Echo instance and the function that serves it
// (serve may be nil for a process without HTTP).
func New(cfg Config, e *echo.Echo, serve ServeFunc, logger *slog.Logger, reg prometheus.Registerer) (*Host, error) {
	h := &Host{
		cfg:    cfg.withDefaults(),
		logger: logger,
		echo:   e,
		serve:  serve,
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pin_runner_restarts_total",
			Help: "Restarts of a background runner after it failed or panicked.",
		}, []string{"runner"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pin_runner_failures_total",
			Help: "Failures (errors or panics) of a background runner, by kind.",
		}, []string{"runner", "kind"}),
	}
	if err := reg.Register(h.restarts); err != nil {
		return nil, fmt.Errorf("host: register metrics: %w", err)
	}
	if err := reg.Register(h.failures); err != nil {
		return nil, fmt.Errorf("host: register metrics: %w", err)
	}
	return h, nil
}

// AddModule registers a module's routes and runners, and the outbox topics
// of an EventSource.
func (h *Host) AddModule(m Module) {
	if src, ok := m.(EventSource); ok {
		for _, t := range src.OutboxTopics() {
			if !slices.Contains(h.topics, t) {
				h.topics = append(h.topics, t)
			}
		}
	}
	if h.echo != nil {
		// A group without middleware of its own adds no catch-all routes:
		// unknown paths stay the router's 404.
		m.RegisterRoutes(h.echo.Group(""))
	}
	h.runners = append(h.runners, m.Runners()...)
	h.logger.Info("module registered", "module", m.Name(), "runners", len(m.Runners()))
}

// OutboxTopics are the topics the registered modules declared
// (EventSource), each once, in the order of registration: what the outbox
// relay, retention and metrics serve.
func (h *Host) OutboxTopics() []string { return slices.Clone(h.topics) }

// drainingError is ReadyUnlessDraining's answer once the stop has begun.
type drainingError struct{}

func (drainingError) Error() string       { return "host: stopping" }
func (drainingError) ReadyReason() string { return "shutting_down" }

// ReadyUnlessDraining wraps ready for /readyz: from the stop signal on it
// reports not ready, through the drain delay and the shutdown after it.
func (h *Host) ReadyUnlessDraining(ready ReadyFunc) ReadyFunc {
	return func(ctx context.Context) error {
		if h.draining.Load() {
			return drainingError{}
		}
		return ready(ctx)
	}
}

// AddRunner registers a platform runner, such as the outbox relay.
func (h *Host) AddRunner(r Runner) { h.runners = append(h.runners, r) }

// Run serves until ctx is cancelled (the caller cancels it on SIGTERM or
// SIGINT), drains for DrainDelay (ReadyUnlessDraining reports not ready from
// that moment), then stops taking work and waits, at most ShutdownTimeout, for
// in-flight requests and runner cycles. It returns nil after a clean stop
// and an error when the HTTP server fails or the stop overruns.
func (h *Host) Run(ctx context.Context) error {
	// Not derived from ctx: the parts keep running through the drain.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()

	// parts names the runners and the HTTP server, and returned[i] is set
	// once parts[i] has returned: a stop that overruns says which part hangs.
	var wg sync.WaitGroup
	parts := make([]string, 0, len(h.runners)+1)
	returned := make([]atomic.Bool, len(h.runners)+1)
	for i, r := range h.runners {
		// Export the series from start, so a dashboard shows 0, not "no data".
		h.restarts.WithLabelValues(r.Name())
		h.failures.WithLabelValues(r.Name(), "error")
		h.failures.WithLabelValues(r.Name(), "panic")
		parts = append(parts, "runner "+r.Name())
		wg.Go(func() {
			defer returned[i].Store(true)
			h.supervise(runCtx, r)
		})
	}

	// A nil channel never delivers: without a server only ctx ends the run.
	var serveErr chan error
	if h.serve != nil {
		serveErr = make(chan error, 1)
		i := len(parts)
		parts = append(parts, "http server")
		go func() {
			err := h.serve(runCtx)
			returned[i].Store(true)
			serveErr <- err
		}()
	}

	var err error
	select {
	case <-ctx.Done():
		h.draining.Store(true)
		err = h.drain(ctx, &serveErr)
		h.logger.InfoContext(ctx, "stop requested: finishing in-flight work", "timeout", h.cfg.ShutdownTimeout.String())
	case err = <-serveErr:
		serveErr = nil // already received; the server has stopped
		if err != nil {
			h.logger.ErrorContext(ctx, "http server failed", "error", err)
			err = fmt.Errorf("host: http server: %w", err)
		}
	}
	cancel()

	done := make(chan error, 1)
	go func() {
		wg.Wait()
		var serr error
		if serveErr != nil {
			serr = <-serveErr
		}
		done <- serr
	}()
	select {
	case serr := <-done:
		if serr != nil && err == nil {
			err = fmt.Errorf("host: http server: %w", serr)
		}
		h.logger.InfoContext(ctx, "stopped")
		return err
	case <-time.After(h.cfg.ShutdownTimeout):
		// Which part did not stop is what an operator needs to look at; the
		// goroutine dump shows where it waits.
		var stuck []string
		for i, name := range parts {
			if !returned[i].Load() {
				stuck = append(stuck, name)
			}
		}
		h.logger.ErrorContext(ctx, "stop overran the shutdown timeout", "timeout", h.cfg.ShutdownTimeout.String(),
			"still_running", stuck, "goroutines", goroutineDump())
		return errors.Join(err, fmt.Errorf("host: work still in flight after the %s shutdown timeout: %s",
			h.cfg.ShutdownTimeout, strings.Join(stuck, ", ")))
	}
}

// drain keeps everything running for DrainDelay while /readyz answers 503,
// unless the HTTP server fails first (then *serveErr is consumed).
func (h *Host) drain(ctx context.Context, serveErr *chan error) error {
	if h.cfg.DrainDelay <= 0 {
		return nil
	}
	h.logger.InfoContext(ctx, "stop requested: draining, /readyz answers 503", "drain", h.cfg.DrainDelay.String())
	select {
	case <-time.After(h.cfg.DrainDelay):
		return nil
	case err := <-*serveErr:
		*serveErr = nil
		if err != nil {
			h.logger.ErrorContext(ctx, "http server failed", "error", err)
			return fmt.Errorf("host: http server: %w", err)
		}
		return nil
	}
}

// goroutineDump is every goroutine's stack, as a SIGQUIT would print it.
func goroutineDump() string {
	var b strings.Builder
	if p := pprof.Lookup("goroutine"); p != nil {
		_ = p.WriteTo(&b, 2)
	}
	return b.String()
}

// supervise keeps r running until ctx ends: a runner that fails or panics is
// logged, counted and restarted after a backoff that grows with failures in
// a row and resets once the runner has stayed up for a while.
func (h *Host) supervise(ctx context.Context, r Runner) {
	waits := backoff.Doubling(h.cfg.MinBackoff, h.cfg.MaxBackoff)
	for {
		started := time.Now()
		err := runSafely(ctx, r)
		if ctx.Err() != nil {
			if err != nil {
				h.logger.WarnContext(ctx, "runner stopped with an error", "runner", r.Name(), "error", err)
			}
			return
		}
		kind := "error"
		var p panicError
		if errors.As(err, &p) {
			kind = "panic"
		}
		if err == nil {
			err = errors.New("returned before being asked to stop")
		}
		h.failures.WithLabelValues(r.Name(), kind).Inc()
		if time.Since(started) > 4*h.cfg.MaxBackoff {
			waits.Reset() // it had stayed up
		}
		wait := waits.NextBackOff()
		h.logger.ErrorContext(ctx, "runner failed; restarting", "runner", r.Name(), "kind", kind, "error", err, "backoff", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		h.restarts.WithLabelValues(r.Name()).Inc()
	}
}

type panicError struct {
	value any
	stack []byte
}

func (p panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func runSafely(ctx context.Context, r Runner) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{value: v, stack: debug.Stack()}
		}
	}()
	return r.Run(ctx)
}
