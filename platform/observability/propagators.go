package observability

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// supportedPropagators are the OTEL_PROPAGATORS values pin honours, named
// one by one rather than through autoprop, which links every contrib
// propagator, the deprecated AWS X-Ray one among them.
var supportedPropagators = map[string]propagation.TextMapPropagator{
	"tracecontext": propagation.TraceContext{},
	"baggage":      propagation.Baggage{},
	"b3":           b3.New(),
	"b3multi":      b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader)),
	"none":         propagation.NewCompositeTextMapPropagator(),
}

// propagatorFromEnv reads OTEL_PROPAGATORS (default tracecontext,baggage).
// An unsupported name is reported through otel.Handle (a warning, as the
// specification asks) and skipped; with nothing left the default applies.
func propagatorFromEnv() propagation.TextMapPropagator {
	var props []propagation.TextMapPropagator
	for name := range strings.SplitSeq(os.Getenv("OTEL_PROPAGATORS"), ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		p, ok := supportedPropagators[name]
		if !ok {
			otel.Handle(fmt.Errorf("OTEL_PROPAGATORS: %q is not supported (tracecontext, baggage, b3, b3multi, none); ignored", name))
			continue
		}
		props = append(props, p)
	}
	if len(props) == 0 {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return propagation.NewCompositeTextMapPropagator(props...)
}

// LogOTelErrors sends the errors OpenTelemetry reports (an exporter that
// cannot reach its collector, a bad OTEL_* value) to logger at WARN; its
// default handler writes them through the log package, which slog shows at
// INFO.
func LogOTelErrors(logger *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "error", err)
	}))
}
