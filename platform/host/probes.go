package host

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/observability"
)

// ReadyFunc reports whether the process can serve traffic.
type ReadyFunc func(ctx context.Context) error

// RegisterProbes adds the operational endpoints: /healthz (the process is
// alive), /readyz (ready reports no error) and /metrics (the registry).
func RegisterProbes(e *echo.Echo, ready ReadyFunc, reg *prometheus.Registry) {
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	e.GET("/metrics", echo.WrapHandler(observability.MetricsHandler(reg)))
}
