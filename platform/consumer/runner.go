package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
)

// Config configures a Runner. Zero values take the defaults.
type Config struct {
	// Name identifies the consumer: it is the Kafka consumer group, the key
	// of its rows in the consumer schema and the consumer label of its
	// metrics. Required; never rename a running consumer (it would start
	// again from the oldest offset with an empty inbox).
	Name string
	// Topic is the topic consumed. Required.
	Topic string
	// Brokers are the bootstrap brokers. Required.
	Brokers []string
	// Sarama is the client configuration (default kafka.ConsumerConfig):
	// pass the service's, with its SASL/TLS settings, for a secured cluster.
	Sarama *sarama.Config
	// Workers is how many records are processed at once (default 8). Records
	// of one partition are always processed one after the other.
	Workers int
	// MaxAttempts is how often Apply is tried before the record is
	// dead-lettered (default 5).
	MaxAttempts int
	// RetryBackoff is the wait after the first failed attempt, doubled after
	// each further one (default 200ms).
	RetryBackoff time.Duration
	// Now is the clock of the delay metric (default time.Now).
	Now func() time.Time
}

// Runner is the host.Runner that consumes one topic in a consumer group and
// hands each record to a Handler under the inbox, the version guard and the
// dead-letter rules of the package.
type Runner[B any] struct {
	db      *gorm.DB
	cfg     Config
	handler Handler[B]
	logger  *slog.Logger
	metrics *metrics
}

// NewRunner returns a Runner of handler on db, registering its metrics with
// reg.
func NewRunner[B any](db *gorm.DB, cfg Config, handler Handler[B], logger *slog.Logger, reg prometheus.Registerer) (*Runner[B], error) {
	if db == nil || handler == nil || logger == nil || reg == nil {
		return nil, errors.New("consumer: NewRunner: db, handler, logger and registerer are required")
	}
	if cfg.Name == "" || cfg.Topic == "" || len(cfg.Brokers) == 0 {
		return nil, errors.New("consumer: NewRunner: Name, Topic and Brokers are required")
	}
	if cfg.Sarama == nil {
		cfg.Sarama = kafka.ConsumerConfig("pin-" + cfg.Name)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m, err := newMetrics(reg, cfg.Name)
	if err != nil {
		return nil, err
	}
	return &Runner[B]{db: db, cfg: cfg, handler: handler, logger: logger.With("runner", "consumer-"+cfg.Name), metrics: m}, nil
}

// Name implements host.Runner.
func (r *Runner[B]) Name() string { return "consumer-" + r.cfg.Name }

// Run consumes until ctx is cancelled. Each record is acknowledged (its
// offset marked) only after its transaction committed or it was
// dead-lettered; when even that fails, Run returns the error and the record
// is delivered again after the host restarts the runner.
func (r *Runner[B]) Run(ctx context.Context) error {
	sub, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
		Brokers:               r.cfg.Brokers,
		Unmarshaler:           wmkafka.DefaultMarshaler{}, // headers to metadata; never fails
		OverwriteSaramaConfig: r.cfg.Sarama,
		ConsumerGroup:         r.cfg.Name,
		NackResendSleep:       r.cfg.RetryBackoff,
		ReconnectRetrySleep:   time.Second,
	}, observability.WatermillLogger(r.logger))
	if err != nil {
		return fmt.Errorf("consumer %s: subscriber: %w", r.cfg.Name, err)
	}
	defer func() { _ = sub.Close() }()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	msgs, err := sub.Subscribe(runCtx, r.cfg.Topic)
	if err != nil {
		return fmt.Errorf("consumer %s: subscribe %s: %w", r.cfg.Name, r.cfg.Topic, err)
	}
	r.logger.InfoContext(ctx, "consumer started", "topic", r.cfg.Topic, "group", r.cfg.Name)

	// The subscriber hands out one record per partition at a time and waits
	// for its ack, so several workers keep per-partition order.
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() {
			for msg := range msgs {
				if err := r.process(runCtx, msg); err != nil {
					msg.Nack()
					cancel(err)
					return
				}
				msg.Ack()
			}
		})
	}
	wg.Wait()
	if err := context.Cause(runCtx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("consumer %s: %w", r.cfg.Name, err)
	}
	return nil
}

// process takes one record to its end: decoded and applied under the inbox
// and the version guard, retried while Apply fails, dead-lettered when it
// cannot be decoded or keeps failing. A nil return means the record may be
// acknowledged.
func (r *Runner[B]) process(ctx context.Context, msg *message.Message) error {
	rec := r.record(msg)
	e, err := r.handler.Decode(rec)
	if err != nil {
		return r.deadLetter(ctx, rec, err, 1)
	}
	backoff := r.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		// A stop lets the transaction in flight commit or roll back whole.
		out, err := r.apply(context.WithoutCancel(ctx), e)
		if err == nil {
			r.count(out, e)
			return nil
		}
		if attempt >= r.cfg.MaxAttempts {
			return r.deadLetter(ctx, rec, err, attempt)
		}
		r.metrics.retries.WithLabelValues(r.cfg.Name).Inc()
		r.logger.WarnContext(ctx, "apply failed; retrying", "message_id", e.MessageID, "aggregate_id", e.AggregateID,
			"version", e.Version, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// apply runs one transaction: the inbox entry, the version guard and the
// handler's effect commit together or not at all.
func (r *Runner[B]) apply(ctx context.Context, e Event[B]) (outcome, error) {
	out := applied
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// One statement records the message in the inbox and, only when it is
		// new there, locks the aggregate's version row (creating it at 0) and
		// returns the last version applied. No row back means a duplicate. The
		// lock makes two deliveries of one aggregate, even across a
		// rebalance, queue up.
		var last []int64
		if err := tx.Raw(`
			WITH fresh AS (
				INSERT INTO consumer.inbox (consumer, message_id) VALUES (?, ?)
				ON CONFLICT DO NOTHING RETURNING consumer)
			INSERT INTO consumer.aggregate_versions (consumer, aggregate_id, version)
			SELECT consumer, ?, 0 FROM fresh
			ON CONFLICT (consumer, aggregate_id) DO UPDATE SET version = consumer.aggregate_versions.version
			RETURNING version`, r.cfg.Name, e.MessageID, e.AggregateID).Scan(&last).Error; err != nil {
			return fmt.Errorf("inbox and version guard: %w", err)
		}
		if len(last) == 0 {
			out = duplicate
			return nil
		}
		if e.Version <= last[0] {
			out = stale
			return nil // the inbox entry stays: this message was seen
		}
		if err := r.handler.Apply(ctx, tx, e, last[0]); err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE consumer.aggregate_versions SET version = ?, applied_at = now() WHERE consumer = ? AND aggregate_id = ?`,
			e.Version, r.cfg.Name, e.AggregateID).Error; err != nil {
			return fmt.Errorf("version guard: %w", err)
		}
		return nil
	})
	return out, err
}

// deadLetter keeps the record whole in consumer.dead_letters; a record
// re-delivered after a crash is kept once.
func (r *Runner[B]) deadLetter(ctx context.Context, rec Record, cause error, attempts int) error {
	headers, err := json.Marshal(rec.Headers)
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	err = r.db.WithContext(context.WithoutCancel(ctx)).Exec(`
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, record_key, headers, value, error, attempts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT ON CONSTRAINT dead_letters_record_key DO NOTHING`,
		r.cfg.Name, rec.Topic, rec.Partition, rec.Offset, rec.Key, string(headers), rec.Value, cause.Error(), attempts).Error
	if err != nil {
		return fmt.Errorf("dead letter of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	r.logger.ErrorContext(ctx, "record dead-lettered", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
		"key", string(rec.Key), "attempts", attempts, "error", cause)
	r.count(deadLettered, Event[B]{})
	return nil
}

func (r *Runner[B]) count(out outcome, e Event[B]) {
	name := r.cfg.Name
	r.metrics.consumed.WithLabelValues(name).Inc()
	switch out {
	case applied:
		r.metrics.delay.WithLabelValues(name).Observe(r.cfg.Now().Sub(e.OccurredAt).Seconds())
	case duplicate:
		r.metrics.duplicates.WithLabelValues(name).Inc()
		r.logger.Debug("duplicate skipped", "message_id", e.MessageID)
	case stale:
		r.metrics.stale.WithLabelValues(name).Inc()
		r.logger.Info("stale event skipped", "message_id", e.MessageID, "aggregate_id", e.AggregateID, "version", e.Version)
	case deadLettered:
		r.metrics.deadLetters.WithLabelValues(name).Inc()
	}
}

// record is the Kafka record behind a watermill-kafka message.
func (r *Runner[B]) record(msg *message.Message) Record {
	ctx := msg.Context()
	rec := Record{Topic: r.cfg.Topic, Headers: map[string]string(msg.Metadata), Value: msg.Payload}
	rec.Key, _ = wmkafka.MessageKeyFromCtx(ctx)
	rec.Partition, _ = wmkafka.MessagePartitionFromCtx(ctx)
	rec.Offset, _ = wmkafka.MessagePartitionOffsetFromCtx(ctx)
	return rec
}
