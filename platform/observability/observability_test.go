package observability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/observability"
)

func TestLoggerCarriesRequestAndRunIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := observability.NewLogger(&buf, -4)
	ctx := correlation.WithRunID(correlation.WithRequestID(context.Background(), "req-1"), "run-1")
	logger.InfoContext(ctx, "cycle started", "as_of", "now")

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "cycle started", line["msg"])
	require.Equal(t, "req-1", line["request_id"])
	require.Equal(t, "run-1", line["run_id"])
	require.Equal(t, "run-1", correlation.ID(ctx), "a run id wins over the request id")
	require.Equal(t, "req-1", correlation.ID(correlation.WithRequestID(context.Background(), "req-1")))
}

// TestLoggerCarriesTraceAndSpanIDs: a line written inside a span names it,
// once; a line outside any span has no trace fields.
func TestLoggerCarriesTraceAndSpanIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := observability.NewLogger(&buf, -4).With("component", "test")
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()

	logger.InfoContext(ctx, "inside")
	logger.InfoContext(context.Background(), "outside")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, 1, strings.Count(lines[0], `"trace_id"`), "one trace_id per line: %s", lines[0])
	var inside, outside map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &inside))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &outside))
	require.Equal(t, span.SpanContext().TraceID().String(), inside["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), inside["span_id"])
	require.Equal(t, "test", inside["component"], "attributes added with With are kept")
	require.NotContains(t, outside, "trace_id")
	require.NotContains(t, outside, "span_id")
}

// TestMetricsHandlerServesExemplarsToOpenMetricsScrapers: a histogram
// observed inside a sampled span carries its trace id as an exemplar, which
// only the OpenMetrics format can show; the classic text format still works.
func TestMetricsHandlerServesExemplarsToOpenMetricsScrapers(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_duration_seconds", Help: "test", Buckets: []float64{1}})
	reg.MustRegister(h)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	observability.Observe(ctx, h, 0.5)
	span.End()
	observability.Observe(context.Background(), h, 2) // no span: no exemplar, still counted

	srv := httptest.NewServer(observability.MetricsHandler(reg))
	t.Cleanup(srv.Close)
	scrape := func(accept string) (string, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.Header.Get("Content-Type"), string(body)
	}

	contentType, body := scrape("application/openmetrics-text; version=1.0.0; charset=utf-8")
	require.Contains(t, contentType, "application/openmetrics-text")
	bucket := regexp.MustCompile(`(?m)^test_duration_seconds_bucket\{le="1.0"\} 1 # \{trace_id="([0-9a-f]{32})"\} 0.5`).FindStringSubmatch(body)
	require.NotNil(t, bucket, "no exemplar on the bucket:\n%s", body)
	require.Equal(t, span.SpanContext().TraceID().String(), bucket[1])
	require.Contains(t, body, "test_duration_seconds_count 2")

	contentType, body = scrape("text/plain")
	require.Contains(t, contentType, "text/plain")
	require.Contains(t, body, "test_duration_seconds_count 2")
	require.NotContains(t, body, "trace_id")
}

func TestParseLevel(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"debug", "info", "warn", "error", "INFO", ""} {
		_, err := observability.ParseLevel(ok)
		require.NoError(t, err, ok)
	}
	_, err := observability.ParseLevel("loud")
	require.Error(t, err)
}

// TestTracerProviderWithoutExporterStillMintsTraceIDs: with no OTEL_*
// variable there is no exporter, but spans must carry real trace ids so the
// traceparent of a request reaches the Kafka record.
func TestTracerProviderWithoutExporterStillMintsTraceIDs(t *testing.T) {
	for _, name := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(name, "")
	}
	tp, err := observability.NewTracerProvider(context.Background(), "test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	require.True(t, span.SpanContext().IsValid())
	require.True(t, span.SpanContext().IsSampled())
}
