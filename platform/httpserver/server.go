// Package httpserver builds the service's Echo server: request ids, panic
// recovery, a body limit, OpenTelemetry tracing, Prometheus metrics, an
// access log, and one error handler that writes every error as
// application/problem+json (RFC 9457). It also runs the server with
// graceful shutdown and offers a strict JSON Bind.
package httpserver

import (
	"fmt"
	"log/slog"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the server name recorded on spans.
const ServiceName = "pin"

// New returns an Echo server with the platform middleware installed; modules
// add their routes to it afterwards (routes added at any time are measured
// and traced). A nil reg skips metric registration, a nil tp uses the global
// tracer provider, a nil logger slog.Default(). Log lines carry the trace id
// when logger comes from observability.NewLogger.
//
// New panics when cfg does not pass Validate: the host validates its
// configuration at start, so a bad value here is a programming error.
//
// Middleware order, outermost first: request id (so every later log line
// carries it), tracing (the span covers everything below), metrics and
// access log (it sees the final status because it renders errors itself),
// panic recovery, body limit, the write gate (AdmitWrite), handler
// deadline (which also turns a dependency's transient failure into 503).
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) *echo.Echo {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("httpserver.New: %v", err))
	}
	cfg = cfg.withDefaults()
	limit, _ := ParseByteSize(cfg.BodyLimit) // checked by Validate
	if logger == nil {
		logger = slog.Default()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}

	e := echo.NewWithConfig(echo.Config{
		// Echo's own complaints (a header written twice) join the service's log
		// instead of its default JSON on stdout.
		Logger:           logger,
		HTTPErrorHandler: errorHandler(cfg.ReadOnly, cfg.RetryAfter),
		// Trust no X-Forwarded-For/X-Real-IP: without a configured proxy they
		// are whatever the client says.
		IPExtractor: echo.ExtractIPDirect(),
	})

	e.Use(
		requestID(logger),
		traceRequests(tp, cfg.Propagator),
		observe(logger, newHTTPMetrics(reg)),
		recoverPanics(),
		bodyLimit(limit),
		admitWrites(cfg.AdmitWrite),
		deadline(cfg.HandlerTimeout, cfg.Transient, cfg.RetryAfter),
	)
	return e
}
