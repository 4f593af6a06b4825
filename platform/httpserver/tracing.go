package httpserver

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests gives every request a server span through otelhttp, named
// "METHOD /route/:template" (the method alone for unmatched requests), with
// the trace context of the request's headers as its parent.
func traceRequests(tp trace.TracerProvider, propagator propagation.TextMapPropagator) echo.MiddlewareFunc {
	if propagator == nil {
		propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	middleware := otelhttp.NewMiddleware(ServiceName,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagator),
		// The HTTP metrics are pin_http_* (metrics.go), not OTel's.
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) (err error) {
			req := c.Request()
			// Echo has routed the request before its middleware runs; the
			// pattern is where otelhttp takes the span name and http.route from.
			// Echo v5 sets it to the closest route even for a 404 or 405.
			req.Pattern = ""
			if route := routeLabel(c); route != RouteUnmatched {
				req.Pattern = req.Method + " " + route
			}
			res, uerr := echo.UnwrapResponse(c.Response())
			if uerr != nil {
				return fmt.Errorf("httpserver: trace: %w", uerr)
			}
			// otelhttp wraps the writer to see the status; Echo's Response
			// stays the one the outer middleware holds.
			w := res.ResponseWriter
			defer func() { res.ResponseWriter = w }()
			middleware(http.HandlerFunc(func(traced http.ResponseWriter, r *http.Request) {
				c.SetRequest(r)
				res.ResponseWriter = traced
				err = next(c)
			})).ServeHTTP(w, req)
			return err
		}
	}
}
