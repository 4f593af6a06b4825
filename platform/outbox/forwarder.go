package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
)

// ForwarderConfig configures a Forwarder. Zero values take the defaults.
type ForwarderConfig struct {
	// Brokers are the Kafka bootstrap brokers. Required.
	Brokers []string
	// Topics are the Kafka topics to forward; each has its own outbox table
	// (TableName) created by a migration. Required.
	Topics []string
	// PollInterval is how often an idle forwarder looks for new rows
	// (default 50ms). It bounds the commit-to-Kafka latency when idle.
	PollInterval time.Duration
	// BatchSize is how many rows one poll reads and forwards before it
	// stores the position (default 100). After a crash up to one batch may
	// be forwarded again.
	BatchSize int
	// ConsumerGroup is the watermill-sql consumer group (default
	// ConsumerGroup). Every forwarder of one outbox must share it.
	ConsumerGroup string
	// MaxAttempts is how often a message that fails for a reason of its own
	// (it cannot be encoded, Kafka rejects it) is tried before it is moved to
	// the dead-letter table (default 5).
	MaxAttempts int
	// RetryBackoff is the first pause between those attempts, doubled each
	// time (default 100ms).
	RetryBackoff time.Duration
	// ReconnectBackoff is the first pause after the broker failed, doubled up
	// to MaxReconnectBackoff (defaults 500ms and 10s).
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration
	// PublishTimeout is how long the subscriber waits for one message to be
	// forwarded before it gives up on it and offers it again (default 60s,
	// above the producer's own worst case of retries and timeouts).
	PublishTimeout time.Duration
	// Sarama overrides the producer configuration (default
	// kafka.ProducerConfig("pin-outbox-forwarder")).
	Sarama *sarama.Config
}

func (c *ForwarderConfig) setDefaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.ConsumerGroup == "" {
		c.ConsumerGroup = ConsumerGroup
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.ReconnectBackoff <= 0 {
		c.ReconnectBackoff = 500 * time.Millisecond
	}
	if c.MaxReconnectBackoff <= 0 {
		c.MaxReconnectBackoff = 10 * time.Second
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = time.Minute
	}
	if c.Sarama == nil {
		c.Sarama = kafka.ProducerConfig("pin-outbox-forwarder")
	}
}

// Forwarder is the host.Runner that moves committed outbox rows to Kafka.
//
// For each topic it runs a watermill components/forwarder fed by a
// watermill-sql subscriber, which reads rows in commit order under a lock on
// the consumer group's offsets row and stores the new position in the same
// transaction once the batch is published. Hence:
//
//   - at least once: a row is acknowledged only after Kafka acknowledged it
//     (acks=all); a crash between the two forwards it again;
//   - in order: rows are read in (transaction_id, offset) order; the rows of
//     one poll are sent as one batch (published at once through watermill-kafka) that never
//     holds two records of one key, and the next poll starts only once the
//     batch is acknowledged, so the records of one key reach their partition
//     in commit order (see pollBatch);
//   - several forwarders (several replicas) may run at once: the row lock
//     lets one of them forward at a time, the others wait their turn;
//   - a broker that is down stops the forwarding session at the first
//     failure, without acknowledging anything unpublished and without
//     holding a transaction open; the forwarder retries with backoff and
//     resumes from the stored position. Publishing into the outbox never
//     depends on the broker.
type Forwarder struct {
	db      *sql.DB
	cfg     ForwarderConfig
	logger  *slog.Logger
	wmLog   watermill.LoggerAdapter
	tracer  trace.Tracer
	metrics *counters
	// inFlight serialises publishing per topic across sessions. A publish
	// that outlives PublishTimeout is abandoned by the subscriber, which
	// then offers the same message again; waiting for the abandoned publish
	// to finish first keeps the records of a key in order (the repeat
	// lands right after the original).
	inFlight map[string]*sync.Mutex
	// oneByOne is, per topic, whether polls are forwarded one message at a
	// time rather than as one batch (see pollBatch): after Kafka refused a
	// record of a batch, until a poll succeeds.
	oneByOne map[string]*atomic.Bool
}

// NewForwarder returns a Forwarder reading the outbox in db. It registers the
// outbox metrics (RegisterMetrics and the publish counters) with reg. It does
// not contact the broker: Run does, and keeps trying while it is down.
func NewForwarder(db *sql.DB, cfg ForwarderConfig, logger *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Forwarder, error) {
	if db == nil || logger == nil || reg == nil || tp == nil {
		return nil, errors.New("outbox: NewForwarder: db, logger, registerer and tracer provider are required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("outbox: NewForwarder: no Kafka brokers")
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("outbox: NewForwarder: no topics")
	}
	seen := map[string]bool{}
	for _, t := range cfg.Topics {
		if err := checkTopic(t); err != nil {
			return nil, err
		}
		if seen[tableBase(t)] {
			return nil, fmt.Errorf("outbox: NewForwarder: topic %q listed twice", t)
		}
		seen[tableBase(t)] = true
	}
	cfg.setDefaults()
	m, err := registerCounters(reg)
	if err != nil {
		return nil, err
	}
	if err := RegisterMetrics(db, reg, MetricsConfig{Topics: cfg.Topics, ConsumerGroup: cfg.ConsumerGroup}); err != nil {
		return nil, err
	}
	inFlight := make(map[string]*sync.Mutex, len(cfg.Topics))
	oneByOne := make(map[string]*atomic.Bool, len(cfg.Topics))
	for _, t := range cfg.Topics {
		inFlight[t] = &sync.Mutex{}
		oneByOne[t] = &atomic.Bool{}
		// The series exist at 0 from the start: a counter that first appears
		// at 1 is no increase to rate()/increase(), so the first failure
		// would go unseen by the alerts and dashboards.
		m.published.WithLabelValues(t)
		m.errors.WithLabelValues(t)
	}
	return &Forwarder{
		inFlight: inFlight,
		oneByOne: oneByOne,
		db:       db,
		cfg:      cfg,
		logger:   logger.With("runner", "outbox-forwarder"),
		wmLog:    watermillLogger(logger.With("runner", "outbox-forwarder")),
		tracer:   tp.Tracer(instrumentation),
		metrics:  m,
	}, nil
}

// Name implements host.Runner.
func (f *Forwarder) Name() string { return "outbox-forwarder" }

// Run forwards until ctx is cancelled, then returns nil. Broker failures are
// handled inside (backoff and resume); Run returns an error only for a
// failure it cannot recover from, and the host then restarts it.
func (f *Forwarder) Run(ctx context.Context) error {
	backoff := f.cfg.ReconnectBackoff
	for {
		started := time.Now()
		err := f.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = f.cfg.ReconnectBackoff // it had been healthy
		}
		f.logger.WarnContext(ctx, "outbox forwarder paused", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, f.cfg.MaxReconnectBackoff)
	}
}

// errSessionEnded reports a session that stopped without an error of its own.
var errSessionEnded = errors.New("outbox: forwarding session ended")

// session connects a producer and forwards every topic until ctx is done or
// the broker fails. It always returns an error unless ctx was cancelled.
func (f *Forwarder) session(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	producer, err := wmkafka.NewPublisher(wmkafka.PublisherConfig{
		Brokers:               f.cfg.Brokers,
		Marshaler:             kafka.Marshaler{},
		OverwriteSaramaConfig: f.cfg.Sarama,
	}, f.wmLog)
	if err != nil {
		return fmt.Errorf("connect to Kafka: %w", err)
	}
	defer func() { _ = producer.Close() }()
	out := &kafkaOut{producer: producer, metrics: f.metrics, tracer: f.tracer, batches: map[string]*pollBatch{}}
	for _, topic := range f.cfg.Topics {
		out.batches[topic] = newPollBatch(topic, out, f.oneByOne[topic], stop)
	}

	var subs []*watermillsql.Subscriber
	defer func() {
		for _, s := range subs {
			_ = s.Close()
		}
	}()
	forwarders := make(map[string]*forwarder.Forwarder, len(f.cfg.Topics))
	for _, topic := range f.cfg.Topics {
		sub, err := watermillsql.NewSubscriber(watermillsql.BeginnerFromStdSQL(f.db), watermillsql.SubscriberConfig{
			ConsumerGroup:  f.cfg.ConsumerGroup,
			PollInterval:   f.cfg.PollInterval,
			ResendInterval: f.cfg.PollInterval,
			RetryInterval:  time.Second,
			AckDeadline:    &f.cfg.PublishTimeout,
			SchemaAdapter:  positionSchema{DefaultPostgreSQLSchema: SchemaAdapter(f.cfg.BatchSize), batch: out.batches[topic]},
			OffsetsAdapter: flushingOffsets{DefaultPostgreSQLOffsetsAdapter: OffsetsAdapter(), batch: out.batches[topic]},
			// Tables come from migrations, never from the running service.
			InitializeSchema: false,
		}, f.wmLog)
		if err != nil {
			return fmt.Errorf("outbox subscriber for %s: %w", topic, err)
		}
		subs = append(subs, sub)
		fwd, err := forwarder.NewForwarder(sub, out, f.wmLog, forwarder.Config{
			ForwarderTopic: topic,
			CloseTimeout:   5 * time.Second,
			Middlewares:    []message.HandlerMiddleware{f.guard(topic, stop)},
		})
		if err != nil {
			return fmt.Errorf("outbox forwarder for %s: %w", topic, err)
		}
		forwarders[topic] = fwd
	}

	var wg sync.WaitGroup
	for topic, fwd := range forwarders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fwd.Run(ctx)
			if err == nil {
				err = errSessionEnded
			}
			stop(fmt.Errorf("forwarder of %s: %w", topic, err))
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// transientError marks a failure of the broker or the connection, not of
// the message: the message must wait, never be dead-lettered.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// guard wraps the forwarder's handler: a transient failure ends the session
// (so the subscriber's transaction ends and the position stays before the
// message); any other failure is retried MaxAttempts times, then the
// message is dead-lettered and acknowledged so the next one can go.
func (f *Forwarder) guard(topic string, stop context.CancelCauseFunc) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			var err error
			pause := f.cfg.RetryBackoff
			attempt := 1
			for ; ; attempt++ {
				if err = f.publishAlone(topic, h, msg); err == nil {
					return nil, nil
				}
				var te *transientError
				if errors.As(err, &te) {
					stop(err)
					return nil, err
				}
				if attempt >= f.cfg.MaxAttempts {
					break
				}
				select {
				case <-msg.Context().Done():
					return nil, err
				case <-time.After(pause):
				}
				pause *= 2
			}
			if dlErr := f.deadLetter(msg, topic, err, attempt); dlErr != nil {
				stop(dlErr)
				return nil, dlErr
			}
			f.logger.ErrorContext(msg.Context(), "outbox message dead-lettered",
				"topic", topic, "outbox_offset", msg.Metadata.Get(metaRowOffset), "attempts", attempt, "err", err)
			return nil, nil
		}
	}
}

func (f *Forwarder) publishAlone(topic string, h message.HandlerFunc, msg *message.Message) error {
	mu := f.inFlight[topic]
	mu.Lock()
	defer mu.Unlock()
	_, err := h(msg)
	return err
}

// kafkaOut publishes unwrapped outbox messages to Kafka, counting and
// tracing each one and telling transient failures from poison messages.
// Normally it adds them to the poll's batch (pollBatch), sent before the
// poll's position is stored; in one-by-one mode it sends each at once.
type kafkaOut struct {
	producer *wmkafka.Publisher
	metrics  *counters
	tracer   trace.Tracer
	batches  map[string]*pollBatch
}

func (k *kafkaOut) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		if err := k.publish(topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func (k *kafkaOut) publish(topic string, msg *message.Message) error {
	if b := k.batches[topic]; b != nil && !b.oneByOne.Load() {
		if err := b.add(msg); err != nil {
			var te *transientError
			if errors.As(err, &te) || isMessageError(err) {
				return err
			}
			return &transientError{err: err}
		}
		return nil
	}
	span := startForwardSpan(msg, k.tracer, topic)
	defer span.End()
	if err := k.producer.Publish(topic, msg); err != nil {
		k.metrics.errors.WithLabelValues(topic).Inc()
		span.RecordError(err)
		span.SetStatus(codes.Error, "forward to Kafka failed")
		if isMessageError(err) {
			return err
		}
		return &transientError{err: err}
	}
	k.metrics.published.WithLabelValues(topic).Inc()
	return nil
}

func (k *kafkaOut) Close() error { return nil }

// isMessageError reports whether err is the message's own fault, so that
// publishing it again can never succeed.
func isMessageError(err error) bool {
	var cfgErr sarama.ConfigurationError // e.g. larger than Producer.MaxMessageBytes
	if errors.As(err, &cfgErr) {
		return true
	}
	for _, target := range []error{
		kafka.ErrNoPartitionKey, kafka.ErrNoMessageID,
		sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidMessage, sarama.ErrInvalidMessageSize,
		sarama.ErrInvalidRecord, sarama.ErrMessageSetSizeTooLarge,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Metadata that positionSchema adds to the enveloped message the forwarder
// reads (never to the unwrapped message that goes to Kafka).
const (
	metaRowOffset        = "_outbox_offset"
	metaRowTransactionID = "_outbox_transaction_id"
)

// positionSchema is DefaultPostgreSQLSchema that also records the row's
// position on the message, for the dead-letter table and logs.
type positionSchema struct {
	watermillsql.DefaultPostgreSQLSchema
	// batch is reset at the start of every poll.
	batch *pollBatch
}

// SelectQuery starts a poll: whatever an earlier poll left unsent was
// rolled back with it and is read again.
//
// The query is watermill's (the consumer group's position locked FOR
// UPDATE, rows after it in (transaction_id, offset) order, only below the
// snapshot's xmin) with one change: "after the position" is the row
// comparison (transaction_id, "offset") > (last transaction, last offset)
// instead of watermill's equivalent (t = T AND o > O) OR t > T. The row
// comparison is an index condition on the primary key, so a poll reads
// BatchSize rows wherever the position is; watermill's form makes
// PostgreSQL read and sort every row after the position on every poll
// (45 ms per poll at a backlog of 20k on the benchmark machine instead of
// 0.2 ms), so a forwarder that fell behind would slow down the further it
// fell behind (docs/performance.md).
func (s positionSchema) SelectQuery(params watermillsql.SelectQueryParams) (watermillsql.Query, error) {
	if s.batch != nil {
		s.batch.reset()
	}
	next, err := params.OffsetsAdapter.NextOffsetQuery(watermillsql.NextOffsetQueryParams{
		Topic: params.Topic, ConsumerGroup: params.ConsumerGroup,
	})
	if err != nil {
		return watermillsql.Query{}, err
	}
	return watermillsql.Query{Query: `
	WITH last_processed AS (` + next.Query + `)
	SELECT "offset", transaction_id, uuid, payload, metadata FROM ` + s.MessagesTable(params.Topic) + `
	WHERE (transaction_id, "offset") > (
			(SELECT last_processed_transaction_id FROM last_processed),
			(SELECT offset_acked FROM last_processed))
		AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY transaction_id ASC, "offset" ASC
	LIMIT ` + strconv.Itoa(cmp.Or(s.SubscribeBatchSize, 100)), Args: next.Args}, nil
}

func (s positionSchema) UnmarshalMessage(params watermillsql.UnmarshalMessageParams) (watermillsql.Row, error) {
	row, err := s.DefaultPostgreSQLSchema.UnmarshalMessage(params)
	if err != nil {
		return row, err
	}
	row.Msg.Metadata.Set(metaRowOffset, strconv.FormatInt(row.Offset, 10))
	if xid, ok := row.ExtraData["transaction_id"].(watermillsql.XID8); ok {
		row.Msg.Metadata.Set(metaRowTransactionID, strconv.FormatUint(uint64(xid), 10))
	}
	return row, nil
}
