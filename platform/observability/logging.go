// Package observability sets up the service's logs (log/slog, JSON), its
// Prometheus registry and its OpenTelemetry tracer provider, and carries the
// request id and run id of the work in progress through the context.
package observability

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/correlation"
)

// WithRequestID returns a context carrying the HTTP request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return correlation.WithRequestID(ctx, id)
}

// WithRunID returns a context carrying the id of a background run (such as
// one expiry cycle).
func WithRunID(ctx context.Context, id string) context.Context {
	return correlation.WithRunID(ctx, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string { return correlation.RequestID(ctx) }

// RunID returns the run id in ctx, or "".
func RunID(ctx context.Context) string { return correlation.RunID(ctx) }

// CorrelationID is the id that ties an event to the operation that caused
// it: the run id of a background cycle, else the HTTP request id.
func CorrelationID(ctx context.Context) string { return correlation.ID(ctx) }

// ParseLevel turns a PIN_LOG_LEVEL value into a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// NewLogger returns a JSON logger writing to w that adds the request id, run
// id, trace id and span id found in the context of each record (log with the
// *Context methods).
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

// contextHandler adds the ids carried by the record's context, so that a
// log line leads to its request, its run and its trace.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if id := RunID(ctx); id != "" {
		r.AddAttrs(slog.String("run_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
