package kafka

import "github.com/rcrowley/go-metrics"

// Sarama's own metrics (rcrowley/go-metrics, archived) are switched off for
// the process: exported nowhere, they cost a lock per request and a ticking
// goroutine (docs/adr/0010-instrumentation.md). Every Sarama client of the
// service is built from this package's configurations, so this runs first.
func init() { metrics.UseNilMetrics = true }
