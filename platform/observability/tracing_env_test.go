package observability_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
)

// The tests of this file set process-wide variables and the global provider
// and propagator: they cannot run in parallel.

const (
	incomingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	w3cParent       = "00-" + incomingTraceID + "-00f067aa0ba902b7-01"
)

// newGlobalTracerProvider is NewTracerProvider under env, with the previous
// global provider and propagator put back when the test ends.
func newGlobalTracerProvider(t *testing.T, env map[string]string) observability.TracerProvider {
	t.Helper()
	for _, name := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_PROPAGATORS", "OTEL_SDK_DISABLED"} {
		t.Setenv(name, env[name])
	}
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	tp, err := observability.NewTracerProvider(context.Background(), "test")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	return tp
}

// serverTraceID is the trace id a request with header sees in its handler,
// on a server wired as `pin serve` wires it.
func serverTraceID(t *testing.T, tp trace.TracerProvider, header http.Header) trace.SpanContext {
	t.Helper()
	e := httpserver.New(httpserver.Config{Propagator: otel.GetTextMapPropagator()}, nil, prometheus.NewRegistry(), tp)
	var seen trace.SpanContext
	e.GET("/x", func(c *echo.Context) error {
		seen = trace.SpanContextFromContext(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	})
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header = header
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNoContent, rec.Code)
	return seen
}

// TestPropagatorsComeFromOTELPropagators: by default the W3C traceparent is
// honoured; OTEL_PROPAGATORS=b3 makes the server read B3 headers instead,
// and none makes it start a trace of its own.
func TestPropagatorsComeFromOTELPropagators(t *testing.T) {
	w3c := http.Header{"Traceparent": {w3cParent}}
	b3 := http.Header{"B3": {incomingTraceID + "-00f067aa0ba902b7-1"}}

	tp := newGlobalTracerProvider(t, nil)
	require.ElementsMatch(t, []string{"traceparent", "tracestate", "baggage"}, otel.GetTextMapPropagator().Fields())
	require.Equal(t, incomingTraceID, serverTraceID(t, tp, w3c).TraceID().String())

	tp = newGlobalTracerProvider(t, map[string]string{"OTEL_PROPAGATORS": "b3"})
	require.Equal(t, incomingTraceID, serverTraceID(t, tp, b3).TraceID().String())
	require.NotEqual(t, incomingTraceID, serverTraceID(t, tp, w3c).TraceID().String(), "traceparent is not read under b3")

	tp = newGlobalTracerProvider(t, map[string]string{"OTEL_PROPAGATORS": "none"})
	seen := serverTraceID(t, tp, w3c)
	require.True(t, seen.IsValid())
	require.NotEqual(t, incomingTraceID, seen.TraceID().String())
}

// TestOTelErrorsAreWarnings: what OpenTelemetry reports through
// otel.Handle (an exporter failing, an unsupported OTEL_PROPAGATORS name) is
// logged at WARN, and the supported propagators still apply.
func TestOTelErrorsAreWarnings(t *testing.T) {
	var logs bytes.Buffer // written by this goroutine only
	observability.LogOTelErrors(slog.New(slog.NewJSONHandler(&logs, nil)))
	t.Cleanup(func() { observability.LogOTelErrors(slog.Default()) })

	otel.Handle(errors.New("traces export: connection refused"))
	require.Contains(t, logs.String(), `"level":"WARN","msg":"opentelemetry","error":"traces export: connection refused"`)

	newGlobalTracerProvider(t, map[string]string{"OTEL_PROPAGATORS": "xray, tracecontext"})
	require.Contains(t, logs.String(), `"level":"WARN","msg":"opentelemetry","error":"OTEL_PROPAGATORS: \"xray\" is not supported`)
	require.ElementsMatch(t, []string{"traceparent", "tracestate"}, otel.GetTextMapPropagator().Fields(), "tracecontext still applies")
}

// TestSDKDisabledGivesTheNoopProvider: OTEL_SDK_DISABLED=true records no
// span (even with an exporter asked for), yet an incoming trace context
// passes through the request to what it writes (the Kafka headers).
func TestSDKDisabledGivesTheNoopProvider(t *testing.T) {
	tp := newGlobalTracerProvider(t, map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "console"})
	_, span := tp.Tracer("test").Start(context.Background(), "op")
	require.False(t, span.IsRecording())
	require.False(t, span.SpanContext().IsValid(), "no trace id is made up")
	span.End()

	seen := serverTraceID(t, tp, http.Header{"Traceparent": {w3cParent}})
	require.Equal(t, incomingTraceID, seen.TraceID().String())
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), seen), carrier)
	require.Equal(t, w3cParent, carrier["traceparent"])

	for _, enabled := range []string{"", "false", "1", "yes"} {
		t.Setenv("OTEL_SDK_DISABLED", enabled)
		require.False(t, observability.SDKDisabled(), "OTEL_SDK_DISABLED=%q", enabled)
	}
}
