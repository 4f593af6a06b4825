// Package observability sets up the service's logs (log/slog, JSON), its
// Prometheus registry and its OpenTelemetry tracer provider. Its logger adds
// the request id and run id that platform/correlation carries in the context.
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
	if id := correlation.RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if id := correlation.RunID(ctx); id != "" {
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
