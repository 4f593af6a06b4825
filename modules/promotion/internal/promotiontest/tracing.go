package promotiontest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracerProvider is an SDK tracer provider with opts (typically a span
// recorder or an in-memory exporter), shut down when the test ends.
func TracerProvider(tb testing.TB, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	tb.Helper()
	tp := sdktrace.NewTracerProvider(opts...)
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}
