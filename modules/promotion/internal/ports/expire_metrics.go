package ports

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/observability"
)

// Outcomes of promotion_expire_items_total.
const (
	expireOutcomeExpired = "expired"
	expireOutcomeFailed  = "failed"
)

// expireMetrics are the expiry cycle's Prometheus metrics. Their names are
// fixed: the dashboard and the alerts of docs/expire-promotions-job.md use
// them.
type expireMetrics struct {
	runs       prometheus.Counter
	duration   prometheus.Histogram
	items      *prometheus.CounterVec
	due        *dueCollector
	interval   prometheus.Gauge
	completed  prometheus.Gauge
	skipLocked prometheus.Counter
	errors     prometheus.Counter
}

// newExpireMetrics creates the metrics and registers them on reg, so they
// are exported from the start with zero values (both outcomes of
// promotion_expire_items_total included): an alert on "no increase" needs a
// series that exists. With a nil reg they are kept but not exported. The
// backlog and poison gauges are counted in store as of now() at scrape time.
func newExpireMetrics(reg prometheus.Registerer, store app.ExpireStore, now func() time.Time) (*expireMetrics, error) {
	m := &expireMetrics{
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "promotion_expire_run_total",
			Help: "Expiry cycles run, whatever their outcome (liveness of the expire-promotions runner).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "promotion_expire_cycle_duration_seconds",
			Help:    "Duration of one expiry cycle.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "promotion_expire_items_total",
			Help: "Purchases handled by the expiry cycles, by outcome: expired (committed) or failed (poison, left Active).",
		}, []string{"outcome"}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "promotion_expire_interval_seconds",
			Help: "The expiry runner's configured interval (PIN_EXPIRE_INTERVAL); the not-running alert allows two of them.",
		}),
		completed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "promotion_expire_last_completed_timestamp_seconds",
			Help: "Unix time of the last expiry cycle that completed without an infrastructure error; the runner's start until one has.",
		}),
		skipLocked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "promotion_expire_skip_locked_total",
			Help: "Due purchases a batch passed over because another transaction held their rows.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "promotion_expire_errors_total",
			Help: "Errors of the expiry cycles: poison items and infrastructure errors.",
		}),
	}
	m.due = &dueCollector{
		backlog: prometheus.NewDesc("promotion_expire_backlog",
			"Active purchases whose EndsAt has passed and that are not expired yet, counted at scrape time.", nil, nil),
		poison: prometheus.NewDesc("promotion_expire_poison_purchases",
			"Active purchases the expiry cycles failed to expire and retries in the place each batch keeps for them (promotion.expire_poison), counted at scrape time.", nil, nil),
		errors: m.errors,
		store:  store,
		now:    now,
	}
	m.items.WithLabelValues(expireOutcomeExpired)
	m.items.WithLabelValues(expireOutcomeFailed)
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.runs, m.duration, m.items, m.due, m.interval, m.completed, m.skipLocked, m.errors} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("expire metrics: register: %w", err)
	}
	return m, nil
}

// scrapeCountTimeout bounds the counts a scrape runs: a slow database makes
// the gauges missing (and counts an error), never the scrape hang.
const scrapeCountTimeout = time.Second

// dueCollector exports promotion_expire_backlog and
// promotion_expire_poison_purchases counted when scraped, so they stay true
// while the cycles are stuck. The backlog count is index-only on the partial
// index promotion_purchases_expiry_idx. A failed count is counted in
// promotion_expire_errors_total and its gauge left out of that scrape.
type dueCollector struct {
	backlog, poison *prometheus.Desc
	errors          prometheus.Counter
	store           app.ExpireStore
	now             func() time.Time
}

// Describe implements prometheus.Collector.
func (c *dueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.poison
}

// Collect implements prometheus.Collector.
func (c *dueCollector) Collect(ch chan<- prometheus.Metric) {
	store, now := c.store, c.now
	ctx, cancel := context.WithTimeout(context.Background(), scrapeCountTimeout)
	defer cancel()
	if n, err := store.CountDue(ctx, now()); err != nil {
		c.errors.Inc()
	} else {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	}
	if n, err := store.CountPoison(ctx); err != nil {
		c.errors.Inc()
	} else {
		ch <- prometheus.MustNewConstMetric(c.poison, prometheus.GaugeValue, float64(n))
	}
}

// runnerStarted records the runner's interval and takes now as the last
// completion (see ExpireTelemetry.RunnerStarted).
func (m *expireMetrics) runnerStarted(interval time.Duration, now time.Time) {
	m.interval.Set(interval.Seconds())
	m.completed.Set(float64(now.UnixNano()) / 1e9)
}

// batchCommitted counts a committed batch. A purchase another writer
// changed under the batch is counted with the skipped ones.
func (m *expireMetrics) batchCommitted(b app.ExpireBatchResult) {
	m.items.WithLabelValues(expireOutcomeExpired).Add(float64(len(b.Expired)))
	m.items.WithLabelValues(expireOutcomeFailed).Add(float64(len(b.Failed)))
	m.skipLocked.Add(float64(b.SkippedLocked + len(b.Superseded)))
	m.errors.Add(float64(len(b.Failed)))
}

// cycleDone counts a cycle; failed means it ended on an infrastructure
// error. ctx carries the cycle's span, the duration's exemplar.
// at is when it ended (wall clock: the alert compares it with time()).
func (m *expireMetrics) cycleDone(ctx context.Context, d time.Duration, failed bool, at time.Time) {
	m.runs.Inc()
	observability.Observe(ctx, m.duration, d.Seconds())
	if failed {
		m.errors.Inc()
		return
	}
	m.completed.Set(float64(at.UnixNano()) / 1e9)
}
