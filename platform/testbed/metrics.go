package testbed

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric returns the first series of the family name gathered from reg, or
// nil when the family is not registered.
func Metric(tb testing.TB, reg prometheus.Gatherer, name string) *dto.Metric {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatalf("testbed: gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0]
		}
	}
	return nil
}
