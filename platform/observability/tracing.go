package observability

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// exporterVariables are the standard variables that ask for a span exporter.
var exporterVariables = []string{
	"OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
}

// NewTracerProvider builds the process's tracer provider from the standard
// OTEL_* variables and installs it, with the W3C trace-context propagator,
// as the global one.
//
// With none of those variables set there is no exporter, but spans are still
// recorded with real trace ids: the traceparent of a request or a cycle must
// reach the Kafka record even where nothing collects the spans here.
func NewTracerProvider(ctx context.Context, serviceVersion string) (*sdktrace.TracerProvider, error) {
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
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, nil
}

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
