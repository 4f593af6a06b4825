package kafka

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TopicCheck is the host.Runner that checks, at start and then every
// Interval, that each topic exists with its partition count. It only
// reports (log and pin_kafka_topic_partitions): nothing else waits for it,
// so the API never depends on Kafka.
type TopicCheck struct {
	brokers  []string
	sec      Security
	topics   []Topic
	interval time.Duration
	logger   *slog.Logger
	gauge    *prometheus.GaugeVec
}

// NewTopicCheck registers pin_kafka_topic_partitions{topic} on reg.
func NewTopicCheck(brokers []string, sec Security, topics []Topic, interval time.Duration, logger *slog.Logger, reg prometheus.Registerer) (*TopicCheck, error) {
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pin_kafka_topic_partitions",
		Help: "Partitions of the topic as last seen on the cluster (0: the topic does not exist). Absent until the first check succeeds.",
	}, []string{"topic"})
	if err := reg.Register(gauge); err != nil {
		return nil, err
	}
	return &TopicCheck{brokers: brokers, sec: sec, topics: topics, interval: interval, logger: logger, gauge: gauge}, nil
}

// Name identifies the runner in logs and metrics.
func (c *TopicCheck) Name() string { return "kafka-topic-check" }

// Run checks until ctx ends.
func (c *TopicCheck) Run(ctx context.Context) error {
	names := make([]string, len(c.topics))
	want := make(map[string]int32, len(c.topics))
	for i, t := range c.topics {
		names[i] = t.Name
		want[t.Name] = t.Partitions
	}
	for {
		// Sarama takes no context: a check runs to its own timeouts.
		states, err := DescribeTopics(c.brokers, c.sec, names)
		if err != nil {
			c.logger.WarnContext(ctx, "kafka topic check failed", "error", err)
		}
		for _, s := range states {
			c.gauge.WithLabelValues(s.Name).Set(float64(s.Partitions))
			switch {
			case s.Partitions == 0:
				c.logger.ErrorContext(ctx, "kafka topic missing", "topic", s.Name, "want_partitions", want[s.Name])
			case s.Partitions != want[s.Name]:
				c.logger.ErrorContext(ctx, "kafka topic has the wrong partition count", "topic", s.Name, "partitions", s.Partitions, "want_partitions", want[s.Name])
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval):
		}
	}
}
