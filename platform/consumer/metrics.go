package consumer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/observability"
)

// outcome is what became of one record; each is counted by its own metric.
type outcome int

const (
	outcomeApplied      outcome = iota // through the guard and the handler
	outcomeDuplicate                   // its messageId was in the inbox already
	outcomeStale                       // the version guard refused it
	outcomeDeadLettered                // undecodable, or still failing after the retries
	outcomeSkipped                     // the handler declined it (ErrSkip)
)

// String is the outcome as a replay reports it (ReplayedDeadLetter.Outcome).
func (o outcome) String() string {
	switch o {
	case outcomeApplied:
		return "applied"
	case outcomeDuplicate:
		return "duplicate"
	case outcomeStale:
		return "stale"
	case outcomeDeadLettered:
		return "dead-lettered"
	case outcomeSkipped:
		return "skipped"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// metrics are shared by every runner of one registry, labelled by consumer.
type metrics struct {
	consumed    *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	stale       *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	retries     *prometheus.CounterVec
	dbFaults    *prometheus.CounterVec
	delay       *prometheus.HistogramVec
	batch       *prometheus.HistogramVec
	lag         *prometheus.GaugeVec
}

// delayBuckets reach past the contracts' one-minute promise (60 s) so its
// p99 can be read, and start at the few milliseconds of a healthy pipeline.
var delayBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics(reg prometheus.Registerer, consumer string) (*metrics, error) {
	counter := func(name, help string) (*prometheus.CounterVec, error) {
		return observability.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"consumer"}))
	}
	m := &metrics{}
	var err error
	for _, c := range []struct {
		dst        **prometheus.CounterVec
		name, help string
	}{
		{&m.consumed, "pin_consumer_consumed_total", "Records a consumer took off its topic and acknowledged, whatever the outcome."},
		{&m.duplicates, "pin_consumer_duplicates_total", "Records skipped because their messageId was already in the consumer's inbox."},
		{&m.stale, "pin_consumer_stale_total", "Events skipped because their version was not above the last one applied for the aggregate."},
		{&m.deadLetters, "pin_consumer_dead_letters_total", "Records put in consumer.dead_letters: undecodable, or still failing after the retries."},
		{&m.skipped, "pin_consumer_skipped_total", "Records a consumer's handler declined as not for it (ErrSkip): neither applied nor dead-lettered."},
		{&m.retries, "pin_consumer_retries_total", "Failed attempts to apply an event that were retried."},
		{&m.dbFaults, "pin_consumer_database_faults_total", "Batches rolled back for a fault of the database, not of a record (an SQLSTATE outside classes 22 and 23, or the connection): the runner restarts, nothing is dead-lettered."},
	} {
		if *c.dst, err = counter(c.name, c.help); err != nil {
			return nil, fmt.Errorf("consumer: register metrics: %w", err)
		}
	}
	m.delay, err = observability.RegisterOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pin_consumer_apply_delay_seconds",
		Help:    "Delay from an event's occurredAt at the producer to its effect committed by the consumer; snapshots are not observed.",
		Buckets: delayBuckets,
	}, []string{"consumer"}))
	if err != nil {
		return nil, fmt.Errorf("consumer: register metrics: %w", err)
	}
	m.batch, err = observability.RegisterOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pin_consumer_batch_events",
		Help:    "Events applied by one committed transaction of a consumer (one partition's batch).",
		Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 200, 500},
	}, []string{"consumer"}))
	if err != nil {
		return nil, fmt.Errorf("consumer: register metrics: %w", err)
	}
	m.lag, err = observability.RegisterOrReuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pin_consumer_lag_records",
		Help: "Records of the topic the consumer group has not committed, as the broker last said (every LagInterval, also while the group is not consuming).",
	}, []string{"consumer"}))
	if err != nil {
		return nil, fmt.Errorf("consumer: register metrics: %w", err)
	}
	// Export every series from the start, so dashboards show 0, not no data.
	for _, v := range []*prometheus.CounterVec{m.consumed, m.duplicates, m.stale, m.deadLetters, m.skipped, m.retries, m.dbFaults} {
		v.WithLabelValues(consumer)
	}
	m.delay.WithLabelValues(consumer)
	m.batch.WithLabelValues(consumer)
	m.lag.WithLabelValues(consumer)
	return m, nil
}
