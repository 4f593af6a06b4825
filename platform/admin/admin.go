// Package admin serves what only an operator may reach: the Go runtime
// profiles of net/http/pprof under /debug/pprof/, and /metrics. It runs on a
// listener of its own (PIN_ADMIN_ADDR) so that nothing of it is ever routed
// on the public one; the public server is an Echo instance that never
// consults http.DefaultServeMux, where net/http/pprof also registers itself.
// Nothing here is authenticated, so an address without a host binds loopback
// (docs/adr/0019-admin-surface.md).
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"time"
)

// DefaultHost is the host an address without one (":6060") binds: IPv4
// loopback only, one listener, the same on every machine (::1 and
// "localhost" are accepted when named).
const DefaultHost = "127.0.0.1"

// Resolve gives addr (host:port) its default host, and reports whether it
// binds loopback only: a loopback IP or "localhost". Any other host, the
// wildcard included, is reachable from the network.
func Resolve(addr string) (resolved string, loopback bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, err
	}
	if host == "" {
		host = DefaultHost
	}
	if host == "localhost" {
		return net.JoinHostPort(host, port), true, nil
	}
	ip, err := netip.ParseAddr(host)
	return net.JoinHostPort(host, port), err == nil && ip.IsLoopback(), nil
}

// shutdownTimeout bounds the stop: a profile still being taken is cut short.
const shutdownTimeout = 5 * time.Second

// Handler serves the pprof index and profiles under /debug/pprof/, and
// metrics under /metrics.
func Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Server is the admin listener, run as a host runner.
type Server struct {
	addr    string
	metrics http.Handler
	logger  *slog.Logger

	mu sync.Mutex
	ln net.Listener // bound by Listen, taken by the first Run
}

// Listen binds addr (see Resolve) now, so that a taken or bad address fails
// the start of the process rather than a runner later. metrics is served as
// /metrics.
func Listen(ctx context.Context, addr string, metrics http.Handler, logger *slog.Logger) (*Server, error) {
	resolved, _, err := Resolve(addr)
	if err != nil {
		return nil, fmt.Errorf("admin: %s (PIN_ADMIN_ADDR): %w", addr, err)
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", resolved)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s (PIN_ADMIN_ADDR): %w", addr, err)
	}
	return &Server{addr: ln.Addr().String(), metrics: metrics, logger: logger, ln: ln}, nil
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
		Handler:           Handler(s.metrics),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.logger.InfoContext(ctx, "admin listener serving /debug/pprof/ and /metrics", "addr", s.addr)
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
