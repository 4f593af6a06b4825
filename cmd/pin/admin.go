package main

import (
	"context"
	"log/slog"

	"github.com/pinmarket/pin/platform/admin"
	"github.com/pinmarket/pin/platform/host"
)

// addAdmin binds the admin listener (profiles, platform/admin) when
// PIN_ADMIN_ADDR is set; unset, pin serves no profile anywhere.
func addAdmin(ctx context.Context, h *host.Host, addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	srv, err := admin.Listen(ctx, addr, logger)
	if err != nil {
		return err
	}
	h.AddRunner(srv)
	return nil
}
