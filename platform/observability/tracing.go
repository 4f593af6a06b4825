package observability

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// exporterVariables are the standard variables that ask for a span exporter.
var exporterVariables = []string{
	"OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
}

// TracerProvider is the process's tracer provider, which the process shuts
// down (flushing the spans still batched) before it exits.
type TracerProvider interface {
	trace.TracerProvider
	Shutdown(ctx context.Context) error
}

// NewTracerProvider builds the process's tracer provider and propagator from
// the standard OTEL_* variables and installs both as the global ones.
//
// OTEL_SDK_DISABLED=true gives the no-op provider, as the specification
// says: no span is recorded, but an incoming trace context still passes
// through to the Kafka headers. OTEL_PROPAGATORS picks the propagators of
// incoming requests (W3C trace context and baggage by default; see
// propagatorFromEnv for the names honoured).
//
// With no exporter variable set there is no exporter, but spans are still
// recorded with real trace ids: the traceparent of a request or a cycle must
// reach the Kafka record even where nothing collects the spans here.
func NewTracerProvider(ctx context.Context, serviceVersion string) (TracerProvider, error) {
	otel.SetTextMapPropagator(propagatorFromEnv())
	if SDKDisabled() {
		tp := disabledProvider{noop.NewTracerProvider()}
		otel.SetTracerProvider(tp)
		return tp, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(serviceName()),
		semconv.ServiceVersion(serviceVersion),
	))
	if err != nil {
		return nil, fmt.Errorf("observability: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exporterRequested() {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("observability: span exporter from OTEL_* variables: %w", err)
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return tp, nil
}

// SDKDisabled reports whether OTEL_SDK_DISABLED asks for the no-op SDK
// ("true", in any case; any other value leaves it enabled).
func SDKDisabled() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
}

// disabledProvider is the no-op provider with nothing to shut down.
type disabledProvider struct{ noop.TracerProvider }

func (disabledProvider) Shutdown(context.Context) error { return nil }

func exporterRequested() bool {
	for _, name := range exporterVariables {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

func serviceName() string {
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		return name
	}
	return "pin"
}
