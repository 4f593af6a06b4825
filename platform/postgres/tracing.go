package postgres

import (
	"github.com/exaring/otelpgx"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// newTracer is the pgx tracer of a pool: a client span per statement whose
// context carries a recording span (an HTTP request, an expiry cycle, a
// relay round, a consumer batch), and none otherwise, so an idle poll costs
// no span. The span holds the statement's text, never its parameter values
// (otelpgx leaves them out unless asked).
func newTracer(tp trace.TracerProvider) *otelpgx.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return otelpgx.NewTracer(
		otelpgx.WithTracerProvider(tp),
		// Pool and statement metrics are go_sql_* and the callers' own.
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		// "query SELECT" and "prepare SELECT": pgx prepares a statement the
		// first time a connection runs it, and both would be named "SELECT".
		otelpgx.WithQuerySpanNamePrefix(),
	)
}
