package httpserver_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/testbed"
)

// testBundle is one server with everything it reports into kept in memory.
type testBundle struct {
	e     *echo.Echo
	reg   *prometheus.Registry
	spans *tracetest.SpanRecorder
	logs  *testbed.LogBuffer
}

func newTestBundle(tb testing.TB, cfg httpserver.Config) *testBundle {
	tb.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tb.Cleanup(func() { _ = tp.Shutdown(tb.Context()) })
	logs := &testbed.LogBuffer{}
	reg := prometheus.NewRegistry()
	e := httpserver.New(cfg, observability.NewLogger(logs, slog.LevelDebug), reg, tp)
	return &testBundle{e: e, reg: reg, spans: spans, logs: logs}
}

// do serves one request in-process.
func (b *testBundle) do(tb testing.TB, req *http.Request) *httptest.ResponseRecorder {
	tb.Helper()
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

// problem is the decoded problem document, with the unknown members kept.
type problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	Instance  string              `json:"instance"`
	RequestID string              `json:"requestId"`
	Errors    []map[string]string `json:"errors"`
	Raw       map[string]any      `json:"-"`
}

func decodeProblem(tb testing.TB, header http.Header, body []byte) problem {
	tb.Helper()
	require.Equal(tb, "application/problem+json", header.Get("Content-Type"), "body: %s", body)
	var p problem
	require.NoError(tb, json.Unmarshal(body, &p), "body: %s", body)
	require.NoError(tb, json.Unmarshal(body, &p.Raw))
	return p
}

// counterValue returns the value of the counter name with exactly labels, or
// -1 when there is no such series.
func counterValue(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	m := findMetric(tb, reg, name, labels)
	if m == nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func findMetric(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// labelValues lists every value the label takes in the metric name.
func labelValues(tb testing.TB, reg *prometheus.Registry, name, label string) []string {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	var values []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					values = append(values, l.GetValue())
				}
			}
		}
	}
	return values
}

func readAll(tb testing.TB, r io.Reader) []byte {
	tb.Helper()
	b, err := io.ReadAll(r)
	require.NoError(tb, err)
	return b
}
