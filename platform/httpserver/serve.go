package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
)

// DefaultShutdownTimeout is used when Serve gets a non-positive one.
const DefaultShutdownTimeout = 30 * time.Second

// Serve listens on cfg.Addr and serves e until ctx is cancelled, then shuts
// down gracefully; see ServeListener. A listen failure (address in use) is
// returned at once.
func Serve(ctx context.Context, e *echo.Echo, cfg Config, shutdownTimeout time.Duration) error {
	cfg = cfg.withDefaults()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpserver: listen on %s: %w", cfg.Addr, err)
	}
	return ServeListener(ctx, ln, e, cfg, shutdownTimeout)
}

// ServeListener serves e on ln (which it closes) with cfg's timeouts until
// ctx is cancelled. Then it stops accepting connections, closes idle ones
// and waits up to shutdownTimeout for in-flight requests to finish; their
// contexts are not cancelled by ctx, so they complete normally. It returns
// nil after a graceful stop, and an error when the server failed or the
// timeout forced the remaining connections closed.
//
// net/http's own error log (TLS handshakes, bad requests it rejects before
// Echo) goes to slog.Default() at warn level.
func ServeListener(ctx context.Context, ln net.Listener, e *echo.Echo, cfg Config, shutdownTimeout time.Duration) error {
	cfg = cfg.withDefaults()
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	srv := &http.Server{
		Handler:           e,
		ReadTimeout:       cfg.ReadTimeout,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("httpserver: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	// ctx is already done: the grace period needs a context of its own.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		closeErr := srv.Close()
		<-served
		return errors.Join(fmt.Errorf("httpserver: graceful shutdown within %s: %w", shutdownTimeout, err), closeErr)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpserver: serve on %s: %w", ln.Addr(), err)
	}
	return nil
}
