package host

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/observability"
)

// ReadyFunc reports whether the process can serve traffic. An error that
// has a ReadyReason() string method gives /readyz its answer; any other is
// answered as "not_ready".
type ReadyFunc func(ctx context.Context) error

// reasoned is an error that carries a short code safe to show strangers.
type reasoned interface{ ReadyReason() string }

// RegisterProbes adds the operational endpoints: /healthz (the process is
// alive), /readyz (ready reports no error) and, unless reg is nil, /metrics
// (the registry).
// /readyz answers a reason code only; the error's text, which may name the
// database's host and user, goes to logger.
func RegisterProbes(e *echo.Echo, ready ReadyFunc, reg *prometheus.Registry, logger *slog.Logger) {
	e.GET("/healthz", func(c *echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c *echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			reason := "not_ready"
			var r reasoned
			if errors.As(err, &r) {
				reason = r.ReadyReason()
			}
			logger.WarnContext(c.Request().Context(), "not ready", "reason", reason, "error", err)
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if reg != nil {
		e.GET("/metrics", echo.WrapHandler(observability.MetricsHandler(reg)))
	}
}
