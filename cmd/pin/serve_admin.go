package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/admin"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/observability"
)

// addAdmin binds the admin listener (profiles and metrics, platform/admin)
// when PIN_ADMIN_ADDR is set; unset, pin serves no profile anywhere.
func addAdmin(ctx context.Context, h *host.Host, addr string, reg *prometheus.Registry, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	srv, err := admin.Listen(ctx, addr, observability.MetricsHandler(reg), logger)
	if err != nil {
		return err
	}
	// config.Load refused this address unless PIN_ADMIN_ALLOW_REMOTE opted in.
	if _, loopback, _ := admin.Resolve(srv.Addr()); !loopback {
		logger.WarnContext(ctx, "admin listener reachable from the network: /debug/pprof/ and /metrics have no authentication (PIN_ADMIN_ALLOW_REMOTE=true)", "addr", srv.Addr())
	}
	h.AddRunner(srv)
	return nil
}
