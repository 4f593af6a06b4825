package httpserver_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/httpserver"
)

// BenchmarkMiddlewareChain serves a POST with a small JSON body through
// New's whole middleware chain (logs discarded, spans not recorded) to a
// handler that binds it: the platform's cost per request, without a
// database (docs/adr/0023-echo-middleware-and-one-backoff.md).
func BenchmarkMiddlewareChain(b *testing.B) {
	e := httpserver.New(httpserver.Config{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), noop.NewTracerProvider())
	e.POST("/x/:id", func(c *echo.Context) error {
		var in struct {
			Name string `json:"name"`
		}
		if err := httpserver.Bind(c, &in); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/x/1", strings.NewReader(`{"name":"a"}`))
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
