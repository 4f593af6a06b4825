package relay

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// relayMetrics are the relay's own metrics, shared by every relay registered
// with one registry.
type relayMetrics struct {
	published *prometheus.CounterVec
	errors    *prometheus.CounterVec
	active    *prometheus.GaugeVec
	// unacknowledged counts the duplicates a relay leaves behind.
	unacknowledged *prometheus.CounterVec
}

func registerRelayMetrics(reg prometheus.Registerer, topics []string) (*relayMetrics, error) {
	published, err := observability.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pin_outbox_published_total",
		Help: "Outbox messages the relay published to Kafka (acknowledged by the broker).",
	}, []string{"topic"}))
	if err != nil {
		return nil, err
	}
	failed, err := observability.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pin_outbox_publish_errors_total",
		Help: "Failed attempts to publish an outbox message to Kafka (broker down, rejected or unencodable message).",
	}, []string{"topic"}))
	if err != nil {
		return nil, err
	}
	active, err := observability.RegisterOrReuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pin_outbox_relay_active",
		Help: "1 while this instance is the active relay of the topic (holds its advisory lock), else 0.",
	}, []string{"topic"}))
	if err != nil {
		return nil, err
	}
	unacknowledged, err := observability.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pin_outbox_unacknowledged_sends_total",
		Help: "Outbox messages Kafka acknowledged whose row the relay could not acknowledge (it had lost the lead or its session); the next active relay sends each again, a duplicate on the topic.",
	}, []string{"topic"}))
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		// The series exist at 0 from the start: a counter that first appears
		// at 1 is no increase to rate()/increase(), so the first failure
		// would go unseen by the alerts and dashboards.
		published.WithLabelValues(t)
		failed.WithLabelValues(t)
		unacknowledged.WithLabelValues(t)
		active.WithLabelValues(t).Set(0)
	}
	return &relayMetrics{published: published, errors: failed, active: active, unacknowledged: unacknowledged}, nil
}

// MetricsConfig says which outbox tables the metrics describe.
type MetricsConfig struct {
	// Topics are the Kafka topics with an outbox table.
	Topics []string
	// Logger reports failed scrapes (default slog.Default()).
	Logger *slog.Logger
}

// RegisterMetrics registers the gauges computed from the database at each
// scrape, per topic:
//
//   - pin_outbox_backlog_messages: committed rows not yet acknowledged
//     (not yet published);
//   - pin_outbox_oldest_message_age_seconds: age of the oldest of them, 0
//     when there is none;
//   - pin_outbox_dead_letters: rows in the dead-letter table no operator
//     discarded;
//   - pin_outbox_held_keys: keys whose records wait behind one of them;
//   - pin_outbox_oldest_held_key_age_seconds: how long the oldest has
//     waited, 0 when none does.
//
// The backlog and its age count only the rows the relay may send: a held
// row waits for an operator, not for the relay.
//
// New calls it; calling it again with the same registry is a no-op.
func RegisterMetrics(db *sql.DB, reg prometheus.Registerer, cfg MetricsConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, t := range cfg.Topics {
		if err := outbox.CheckTopic(t); err != nil {
			return err
		}
	}
	_, err := observability.RegisterOrReuse[prometheus.Collector](reg, &backlogCollector{db: db, cfg: cfg})
	return err
}

var (
	backlogDesc = prometheus.NewDesc("pin_outbox_backlog_messages",
		"Committed outbox messages not yet forwarded to Kafka.", []string{"topic"}, nil)
	oldestDesc = prometheus.NewDesc("pin_outbox_oldest_message_age_seconds",
		"Age of the oldest outbox message not yet forwarded to Kafka; 0 when none.", []string{"topic"}, nil)
	deadLettersDesc = prometheus.NewDesc("pin_outbox_dead_letters",
		"Outbox messages in the dead-letter table (gave up after bounded retries), not counting those an operator discarded.", []string{"topic"}, nil)
	heldKeysDesc = prometheus.NewDesc("pin_outbox_held_keys",
		"Keys (purchases) whose later outbox messages wait behind a dead letter of theirs until it is replayed or discarded.", []string{"topic"}, nil)
	oldestHeldDesc = prometheus.NewDesc("pin_outbox_oldest_held_key_age_seconds",
		"How long the key held longest has waited behind its dead letter; 0 when none is held.", []string{"topic"}, nil)
)

// backlogCollector queries the outbox at scrape time. Its descriptors are
// fixed, so registering a second one on the same registry reports
// AlreadyRegisteredError and RegisterMetrics keeps the first.
type backlogCollector struct {
	db  *sql.DB
	cfg MetricsConfig
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- oldestDesc
	ch <- deadLettersDesc
	ch <- heldKeysDesc
	ch <- oldestHeldDesc
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, topic := range c.cfg.Topics {
		backlog, age, dead, err := Stats(ctx, c.db, topic)
		if err != nil {
			c.cfg.Logger.WarnContext(ctx, "outbox metrics: query failed", "topic", topic, "err", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(backlog), topic)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age.Seconds(), topic)
		ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue, float64(dead), topic)
		held, err := readHeld(ctx, c.db, topic)
		if err != nil {
			c.cfg.Logger.WarnContext(ctx, "outbox metrics: query failed", "topic", topic, "err", err)
			continue
		}
		var heldAge float64
		if held.Oldest != nil {
			heldAge = held.Oldest.AgeSeconds
		}
		ch <- prometheus.MustNewConstMetric(heldKeysDesc, prometheus.GaugeValue, float64(held.Keys), topic)
		ch <- prometheus.MustNewConstMetric(oldestHeldDesc, prometheus.GaugeValue, heldAge, topic)
	}
}

// Stats returns, for the outbox of topic, the number of committed messages
// not yet acknowledged that the relay may send (not held behind a dead
// letter), the age of the oldest of them, and the number of dead letters
// waiting (not discarded).
func Stats(ctx context.Context, db *sql.DB, topic string) (backlog int64, oldest time.Duration, deadLetters int64, err error) {
	if err := outbox.CheckTopic(topic); err != nil {
		return 0, 0, 0, err
	}
	var ageSeconds float64
	if backlog, ageSeconds, err = store.Backlog(ctx, db, topic); err != nil {
		return 0, 0, 0, err
	}
	if deadLetters, _, err = store.DeadLetterCounts(ctx, db, topic); err != nil {
		return 0, 0, 0, err
	}
	return backlog, time.Duration(max(ageSeconds, 0) * float64(time.Second)), deadLetters, nil
}
