// Package admin serves what only an operator may reach: today the Go runtime
// profiles of net/http/pprof under /debug/pprof/. It runs on a listener of
// its own (PIN_ADMIN_ADDR) so that nothing of it is ever routed on the public
// one; the public server is an Echo instance that never consults
// http.DefaultServeMux, where net/http/pprof also registers itself.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"
)

// shutdownTimeout bounds the stop: a profile still being taken is cut short.
const shutdownTimeout = 5 * time.Second

// Handler serves the pprof index and profiles under /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Server is the admin listener, run as a host runner.
type Server struct {
	addr   string
	logger *slog.Logger

	mu sync.Mutex
	ln net.Listener // bound by Listen, taken by the first Run
}

// Listen binds addr now, so that a taken or bad address fails the start of
// the process rather than a runner later.
func Listen(ctx context.Context, addr string, logger *slog.Logger) (*Server, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s (PIN_ADMIN_ADDR): %w", addr, err)
	}
	return &Server{addr: ln.Addr().String(), logger: logger, ln: ln}, nil
}

// Addr is the address the server listens on (the port chosen when addr's was 0).
func (s *Server) Addr() string { return s.addr }

// Name identifies the runner in logs and metrics.
func (s *Server) Name() string { return "admin" }

// Run serves Handler until ctx is cancelled. After a failure the host runs it
// again, and then it binds its address anew.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	s.mu.Unlock()
	if ln == nil {
		var err error
		if ln, err = new(net.ListenConfig).Listen(ctx, "tcp", s.addr); err != nil {
			return fmt.Errorf("admin: listen on %s: %w", s.addr, err)
		}
	}
	// No write timeout: /debug/pprof/profile?seconds=N writes after N seconds.
	srv := &http.Server{
		Handler:           Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.logger.InfoContext(ctx, "admin listener serving /debug/pprof/", "addr", s.addr)
	select {
	case err := <-served:
		return fmt.Errorf("admin: serve on %s: %w", s.addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin: serve on %s: %w", s.addr, err)
	}
	return nil
}
