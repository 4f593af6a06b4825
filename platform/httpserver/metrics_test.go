package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
)

// TestRequestDurationHasTraceExemplars: scraped as OpenMetrics, the request
// duration histogram links the request's bucket to the request's trace.
func TestRequestDurationHasTraceExemplars(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/x/:id", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })
	req := httptest.NewRequest(http.MethodGet, "/x/1", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusNoContent, b.do(t, req).Code)

	scrape := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	scrape.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	rec := httptest.NewRecorder()
	observability.MetricsHandler(b.reg).ServeHTTP(rec, scrape)

	exemplar := regexp.MustCompile(`(?m)^` + httpserver.MetricRequestDuration +
		`_bucket\{method="GET",route="/x/:id",le="[^"]+"\} 1 # \{trace_id="4bf92f3577b34da6a3ce929d0e0e4736"\} `)
	require.Regexp(t, exemplar, rec.Body.String())
}
