package httpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/observability"
)

// Metric names, fixed: dashboards and alerts use them.
const (
	MetricRequestsTotal   = "pin_http_requests_total"
	MetricRequestDuration = "pin_http_request_duration_seconds"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the HTTP metrics with reg. A second server on the
// same registry (tests, a restarted host) shares the collectors already
// registered instead of failing.
func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequestsTotal,
			Help: "HTTP requests handled, by route template, method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time to handle an HTTP request, by route template and method.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("httpserver: register metric: %v", err))
	}
	return c
}

func (m *httpMetrics) observe(ctx context.Context, route, method string, status int, elapsed time.Duration) {
	m.requests.WithLabelValues(route, method, statusLabel(status)).Inc()
	observability.Observe(ctx, m.duration.WithLabelValues(route, method), elapsed.Seconds())
}
