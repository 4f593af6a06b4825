package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
)

// RelayConfig configures a Relay. Zero values take the defaults.
type RelayConfig struct {
	// Brokers are the Kafka bootstrap brokers. Required.
	Brokers []string
	// Topics are the Kafka topics to relay, as the modules declare them; each
	// has its own outbox table (TableName) created by a migration. Required.
	Topics []string
	// PollInterval is how long the active relay pauses after finding the
	// outbox empty (default DefaultPollInterval); after a non-empty batch it looks again at
	// once, and for the next ten empty reads it pauses a tenth of it. It
	// bounds the commit-to-Kafka latency of the first event after a quiet
	// spell. A pause longer than SessionTimeout/5 is cut to it: the read is
	// the idle leader's heartbeat.
	PollInterval time.Duration
	// BatchSize is how many rows one round reads, publishes and acknowledges
	// (default 200). After a crash up to one batch may be sent again.
	BatchSize int
	// LockRetryInterval is how often a standby tries to become the active
	// relay of a topic (default 1s); it bounds the takeover time. It must be
	// shorter than SessionTimeout.
	LockRetryInterval time.Duration
	// SessionTimeout is how long the database lets a relay's session stay
	// silent before it ends it, releasing the lock (default 5s). The active
	// relay pings every fifth of it, so only a frozen process stays silent
	// that long: it is replaced within SessionTimeout + LockRetryInterval.
	// At least 1s.
	SessionTimeout time.Duration
	// StatementTimeout bounds every statement of the relay (default 5s): an
	// active relay whose database stops answering gives up within it.
	StatementTimeout time.Duration
	// MaxAttempts is how often a message that fails for a reason of its own
	// (it cannot be encoded, Kafka refuses it) is tried before it is moved to
	// the dead-letter table (default 5).
	MaxAttempts int
	// RetryBackoff is the first pause between those attempts, doubled each
	// time (default 100ms).
	RetryBackoff time.Duration
	// ReconnectBackoff is the first pause after the broker or the database
	// failed, doubled up to MaxReconnectBackoff (defaults 500ms and 10s).
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration
	// Sarama overrides the producer configuration (default
	// kafka.ProducerConfig("pin-outbox-relay")).
	Sarama *sarama.Config
}

// DefaultPollInterval is RelayConfig.PollInterval when not set, and
// PIN_OUTBOX_POLL_INTERVAL's default.
const DefaultPollInterval = 50 * time.Millisecond

func (c *RelayConfig) setDefaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 200
	}
	if c.LockRetryInterval <= 0 {
		c.LockRetryInterval = time.Second
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 5 * time.Second
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 5 * time.Second
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
	if c.Sarama == nil {
		c.Sarama = kafka.ProducerConfig("pin-outbox-relay")
	}
}

// Relay is the host.Runner that sends committed outbox rows to Kafka. Every
// instance of the service runs one; per topic, the one holding the topic's
// PostgreSQL advisory lock is active and the others stand by. The design and
// its guarantees are in docs/adr/0008-outbox-relay.md.
type Relay struct {
	db      *sql.DB
	cfg     RelayConfig
	logger  *slog.Logger
	wmLog   watermill.LoggerAdapter
	tracer  trace.Tracer
	metrics *relayMetrics
	schema  watermillsql.PostgreSQLQueueSchema
	offsets watermillsql.PostgreSQLQueueOffsetsAdapter
}

// NewRelay returns a Relay reading the outbox in db. It registers the outbox
// metrics with reg. It contacts neither the database nor the broker: Run
// does, and keeps trying while they are down.
func NewRelay(db *sql.DB, cfg RelayConfig, logger *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Relay, error) {
	if db == nil || logger == nil || reg == nil || tp == nil {
		return nil, errors.New("outbox: NewRelay: db, logger, registerer and tracer provider are required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("outbox: NewRelay: no Kafka brokers")
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("outbox: NewRelay: no topics")
	}
	seen := map[string]bool{}
	for _, t := range cfg.Topics {
		if err := checkTopic(t); err != nil {
			return nil, err
		}
		if seen[tableBase(t)] {
			return nil, fmt.Errorf("outbox: NewRelay: topic %q listed twice", t)
		}
		seen[tableBase(t)] = true
	}
	cfg.setDefaults()
	if cfg.SessionTimeout < time.Second {
		return nil, fmt.Errorf("outbox: NewRelay: SessionTimeout %v is below 1s: a live relay waiting for the database would lose the lead", cfg.SessionTimeout)
	}
	if cfg.LockRetryInterval >= cfg.SessionTimeout {
		return nil, fmt.Errorf("outbox: NewRelay: LockRetryInterval %v must be shorter than SessionTimeout %v, or the database ends a standby's session between two tries",
			cfg.LockRetryInterval, cfg.SessionTimeout)
	}
	m, err := registerRelayMetrics(reg, cfg.Topics)
	if err != nil {
		return nil, err
	}
	if err := RegisterMetrics(db, reg, MetricsConfig{Topics: cfg.Topics, Logger: logger}); err != nil {
		return nil, err
	}
	logger = logger.With("runner", "outbox-relay")
	return &Relay{
		db:      db,
		cfg:     cfg,
		logger:  logger,
		wmLog:   observability.WatermillLogger(logger),
		tracer:  tp.Tracer(instrumentation),
		metrics: m,
		schema:  SchemaAdapter(cfg.BatchSize),
		offsets: OffsetsAdapter(),
	}, nil
}

// Name implements host.Runner.
func (r *Relay) Name() string { return "outbox-relay" }

// Run relays every topic until ctx is cancelled, then returns nil. Failures
// of the broker or the database end the topic's term as active relay; it
// backs off and competes for the lock again.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, topic := range r.cfg.Topics {
		wg.Go(func() {
			backoff := r.cfg.ReconnectBackoff
			for {
				started := time.Now()
				err := r.relay(ctx, topic)
				if ctx.Err() != nil {
					return
				}
				if time.Since(started) > time.Minute {
					backoff = r.cfg.ReconnectBackoff // it had been healthy
				}
				r.logger.WarnContext(ctx, "outbox relay paused", "topic", topic, "err", err, "retry_in", backoff)
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, r.cfg.MaxReconnectBackoff)
			}
		})
	}
	wg.Wait()
	return nil
}

// relay is one term of this instance for topic: it waits until it holds the
// topic's advisory lock, then loops — read a batch, publish it, acknowledge
// it, commit — until ctx ends (nil) or something fails (the error). The lock
// is a session lock on conn, so it ends with the session: when this process
// dies, freezes or its connection is cut, PostgreSQL releases it and a
// standby's next try succeeds. Every acknowledgement runs on conn, so a relay
// whose session ended acknowledges nothing (leader.go).
func (r *Relay) relay(ctx context.Context, topic string) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("database connection: %w", err)
	}
	defer discard(conn)
	if err := r.openSession(ctx, conn); err != nil {
		return err
	}
	if err := r.awaitLock(ctx, conn, topic); err != nil {
		return err
	}
	r.metrics.active.WithLabelValues(topic).Set(1)
	defer r.metrics.active.WithLabelValues(topic).Set(0)
	r.logger.InfoContext(ctx, "outbox relay active", "topic", topic)

	var producer *wmkafka.Publisher
	r.whileLeading(ctx, conn, func(context.Context) {
		producer, err = wmkafka.NewPublisher(wmkafka.PublisherConfig{
			Brokers:               r.cfg.Brokers,
			Marshaler:             kafka.Marshaler{},
			OverwriteSaramaConfig: r.cfg.Sarama,
		}, r.wmLog)
	})
	if err != nil {
		// A broker that refuses us (down, bad credentials, untrusted
		// certificate) is a failed publish attempt for the operator.
		r.metrics.errors.WithLabelValues(topic).Inc()
		return fmt.Errorf("connect to Kafka: %w", err)
	}
	defer func() { _ = producer.Close() }()

	quiet := 0 // empty reads in a row
	for {
		// A round, once started, finishes even when ctx is cancelled: what
		// went to Kafka is acknowledged rather than sent again. READ
		// COMMITTED: the SELECT takes its snapshot after the lock was
		// granted, so it sees every acknowledgement of the previous holder.
		roundStart := time.Now()
		round, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxRound)
		tx, err := conn.BeginTx(round, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			cancel()
			return fmt.Errorf("begin: %w", err)
		}
		rows, err := r.readBatch(round, tx, topic)
		if err == nil && len(rows) > 0 {
			traced, span := r.startRoundSpan(round, topic, roundStart, len(rows))
			var acked []int64
			var dead []deadLetter
			var sendErr error
			r.whileLeading(traced, tx, func(ctx context.Context) {
				acked, dead, sendErr = r.publish(ctx, producer, topic, rows)
			})
			err = r.acknowledge(traced, tx, topic, acked, dead)
			if err == nil {
				err = tx.Commit()
			}
			if err != nil && len(acked) > 0 {
				// Kafka has them, the outbox does not know: the next
				// active relay sends them again.
				r.metrics.unacknowledged.WithLabelValues(topic).Add(float64(len(acked)))
				r.logger.WarnContext(ctx, "outbox acknowledgement failed after publishing",
					"topic", topic, "sent_again", len(acked), "err", err)
			}
			err = errors.Join(sendErr, err)
			endSpan(span, err, "relay round failed")
		}
		_ = tx.Rollback() // after a commit, a no-op
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("relay %s: %w", topic, err)
		case ctx.Err() != nil:
			// Asked to stop: the round in flight is done, the backlog is
			// the next active relay's (the host's stop has a deadline).
			return nil
		case len(rows) > 0:
			quiet = 0
			continue // traffic: look again at once
		case !sleep(ctx, min(r.pause(quiet), r.heartbeat())): // an idle leader's read is its heartbeat
			return nil
		}
		quiet++
	}
}

// pause is the wait after an empty read, quiet empty reads in a row since
// the last rows: a tenth of PollInterval for the first ten (traffic that
// pauses between two commits is picked up within milliseconds), then
// PollInterval.
func (r *Relay) pause(quiet int) time.Duration {
	if quiet < 10 {
		return r.cfg.PollInterval / 10
	}
	return r.cfg.PollInterval
}

// maxRound bounds one round, far above its worst case (Sarama's retries and
// timeouts of a failing broker, the poison retries): a round still running
// then is on a connection that stopped answering, and is given up.
const maxRound = 2 * time.Minute

// outboxRow is one unacknowledged row. bad is set when the row cannot even
// be turned into a message; it then goes straight to the dead letters.
type outboxRow struct {
	offset   int64
	msg      *message.Message
	metadata []byte
	bad      error
}

// readBatch reads up to BatchSize unacknowledged rows in offset order, with
// watermill-sql's queue query (FOR UPDATE: a row is never published by two
// relays that both believe they are active).
func (r *Relay) readBatch(ctx context.Context, tx *sql.Tx, topic string) ([]outboxRow, error) {
	q, err := r.schema.SelectQuery(watermillsql.SelectQueryParams{Topic: topic})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	rows, err := tx.QueryContext(ctx, q.Query, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var row outboxRow
		var id string
		var payload []byte
		if err := rows.Scan(&row.offset, &id, &payload, &row.metadata); err != nil {
			return nil, fmt.Errorf("read batch: %w", err)
		}
		row.msg = message.NewMessage(id, payload)
		if len(row.metadata) > 0 {
			if err := json.Unmarshal(row.metadata, &row.msg.Metadata); err != nil {
				row.bad = fmt.Errorf("metadata is not a JSON object of strings: %w", err)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	return out, nil
}

// publish sends rows to Kafka in waves: a wave holds at most one row per key
// and is sent at once (Sarama gathers the concurrent sends into a few
// produce requests), and the next wave starts when it is acknowledged, so
// the records of a key reach their partition in outbox order. It returns
// the offsets Kafka acknowledged and the messages to dead-letter; on a
// failure of the broker, or once ctx ended (the lead lost), it stops there
// and returns the error as well.
func (r *Relay) publish(ctx context.Context, producer *wmkafka.Publisher, topic string, rows []outboxRow) (acked []int64, dead []deadLetter, err error) {
	for _, wave := range waves(rows) {
		if ctx.Err() != nil {
			return acked, dead, context.Cause(ctx) // the lead is lost: send no more
		}
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, row := range wave {
			if row.bad != nil {
				errs[i] = row.bad
				continue
			}
			wg.Go(func() { errs[i] = r.send(producer, topic, row.msg) })
		}
		wg.Wait()
		var transient error
		for i, row := range wave {
			switch {
			case errs[i] == nil:
				acked = append(acked, row.offset)
			case row.bad != nil:
				dead = append(dead, deadLetter{row: row, err: row.bad, attempts: 1})
			case isMessageError(errs[i]):
				// Its own fault: retried alone before the key moves on.
				attempts, err := r.retry(ctx, producer, topic, row.msg, errs[i])
				if err == nil {
					acked = append(acked, row.offset)
				} else if isMessageError(err) {
					dead = append(dead, deadLetter{row: row, err: err, attempts: attempts})
				} else {
					transient = errors.Join(transient, err)
				}
			default:
				transient = errors.Join(transient, errs[i])
			}
		}
		if transient != nil {
			return acked, dead, transient
		}
	}
	return acked, dead, nil
}

// waves splits rows, in offset order, so that the n-th row of a key lands in
// the n-th wave.
func waves(rows []outboxRow) [][]outboxRow {
	var out [][]outboxRow
	nth := map[string]int{}
	for _, row := range rows {
		key := row.msg.Metadata.Get(kafka.MetaPartitionKey)
		i := nth[key]
		nth[key]++
		if i == len(out) {
			out = append(out, nil)
		}
		out[i] = append(out[i], row)
	}
	return out
}

// retry publishes a message that Kafka refused until it goes through or
// MaxAttempts is reached, pausing RetryBackoff, doubled each time.
func (r *Relay) retry(ctx context.Context, producer *wmkafka.Publisher, topic string, msg *message.Message, err error) (attempts int, _ error) {
	pause := r.cfg.RetryBackoff
	for attempts = 1; attempts < r.cfg.MaxAttempts && isMessageError(err); attempts++ {
		if !sleep(ctx, pause) {
			return attempts, err
		}
		pause *= 2
		err = r.send(producer, topic, msg)
	}
	return attempts, err
}

// send publishes one message through watermill-kafka, counting and tracing
// it as a child of the publication that stored it.
func (r *Relay) send(producer *wmkafka.Publisher, topic string, msg *message.Message) error {
	span := startForwardSpan(msg, r.tracer, topic)
	defer span.End()
	if err := producer.Publish(topic, msg); err != nil {
		r.metrics.errors.WithLabelValues(topic).Inc()
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish to Kafka failed")
		return err
	}
	r.metrics.published.WithLabelValues(topic).Inc()
	return nil
}

// acknowledge marks the published rows acked and moves the dead letters
// aside (copy, then ack), with watermill-sql's queue acknowledgement.
func (r *Relay) acknowledge(ctx context.Context, tx *sql.Tx, topic string, acked []int64, dead []deadLetter) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	for _, d := range dead {
		if err := insertDeadLetter(ctx, tx, topic, d); err != nil {
			return err
		}
		r.logger.ErrorContext(ctx, "outbox message dead-lettered",
			"topic", topic, "outbox_offset", d.row.offset, "message_id", d.row.msg.UUID, "attempts", d.attempts, "err", d.err)
		acked = append(acked, d.row.offset)
	}
	if len(acked) == 0 {
		return nil
	}
	rows := make([]watermillsql.Row, len(acked))
	for i, offset := range acked {
		rows[i] = watermillsql.Row{Offset: offset}
	}
	q, err := r.offsets.AckMessageQuery(watermillsql.AckMessageQueryParams{Topic: topic, Rows: rows})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q.Query, q.Args...); err != nil {
		return fmt.Errorf("acknowledge: %w", err)
	}
	return nil
}

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

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// startForwardSpan starts the span of one relayed message as a child of
// the publication that stored it (its traceparent metadata).
func startForwardSpan(msg *message.Message, tracer trace.Tracer, topic string) trace.Span {
	ctx := propagation.TraceContext{}.Extract(msg.Context(),
		propagation.MapCarrier{kafka.MetaTraceparent: msg.Metadata.Get(kafka.MetaTraceparent)})
	_, span := tracer.Start(ctx, "outbox forward "+topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.message.id", msg.UUID),
		))
	return span
}
