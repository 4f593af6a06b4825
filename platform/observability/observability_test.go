package observability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/observability"
)

func TestLoggerCarriesRequestAndRunIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := observability.NewLogger(&buf, -4)
	ctx := observability.WithRunID(observability.WithRequestID(context.Background(), "req-1"), "run-1")
	logger.InfoContext(ctx, "cycle started", "as_of", "now")

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "cycle started", line["msg"])
	require.Equal(t, "req-1", line["request_id"])
	require.Equal(t, "run-1", line["run_id"])
	require.Equal(t, "run-1", observability.CorrelationID(ctx), "a run id wins over the request id")
	require.Equal(t, "req-1", observability.CorrelationID(observability.WithRequestID(context.Background(), "req-1")))
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
