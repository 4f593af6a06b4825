package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/backoff"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// Config configures a Relay. Zero values take the defaults.
type Config struct {
	// Brokers are the Kafka bootstrap brokers. Required.
	Brokers []string
	// Topics are the Kafka topics to relay, as the modules declare them; each
	// has its table in outbox.messages, made by `pin migrate up`
	// (outbox.EnsureTopics). A topic without one waits (Run). Required.
	Topics []string
	// PollInterval is how long the active relay pauses after finding the
	// outbox empty. Required: PIN_OUTBOX_POLL_INTERVAL, whose default
	// platform/config holds. After a non-empty batch it looks again at
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
	// ReconnectBackoff is the first pause after the broker or the database
	// failed, doubled up to MaxReconnectBackoff (defaults 500ms and 10s); each
	// wait is jittered (platform/backoff) so relays of several instances part.
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration
	// Sarama overrides the producer configuration (default
	// kafka.ProducerConfig("pin-outbox-relay")). A Producer.MaxMessageBytes
	// below kafka.MaxRecordBytes dead-letters the events between the two.
	Sarama *sarama.Config
	// ApplicationName, when set, is the application_name of the relay's
	// lock sessions, so pg_stat_activity names the leader's instance.
	ApplicationName string
}

func (c *Config) setDefaults() {
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

// instrumentation is the scope of the relay's spans: the outbox's, as the
// publications' spans it continues.
const instrumentation = "github.com/pinmarket/pin/platform/outbox"

// Relay is the host.Runner that sends committed outbox rows to Kafka. Every
// instance of the service runs one; per topic, the one holding the topic's
// PostgreSQL advisory lock is active and the others stand by. This file
// holds its configuration and its terms; the lock is leader.go's, the send
// loop send.go's, the publishing of a batch produce.go's. The design and its
// guarantees are in docs/adr/0008-outbox-relay.md.
type Relay struct {
	db      *sql.DB
	cfg     Config
	logger  *slog.Logger
	wmLog   watermill.LoggerAdapter
	tracer  trace.Tracer
	metrics *relayMetrics
}

// New returns a Relay reading the outbox in db. It registers the outbox
// metrics with reg. It contacts neither the database nor the broker: Run
// does, and keeps trying while they are down.
func New(db *sql.DB, cfg Config, logger *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Relay, error) {
	if db == nil || logger == nil || reg == nil || tp == nil {
		return nil, errors.New("outbox: New: db, logger, registerer and tracer provider are required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("outbox: New: no Kafka brokers")
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("outbox: New: no topics")
	}
	if cfg.PollInterval <= 0 {
		return nil, errors.New("outbox: New: no PollInterval (PIN_OUTBOX_POLL_INTERVAL)")
	}
	seen := map[string]bool{}
	for _, t := range cfg.Topics {
		if err := outbox.CheckTopic(t); err != nil {
			return nil, err
		}
		if seen[t] {
			return nil, fmt.Errorf("outbox: New: topic %q listed twice", t)
		}
		seen[t] = true
	}
	cfg.setDefaults()
	if cfg.SessionTimeout < time.Second {
		return nil, fmt.Errorf("outbox: New: SessionTimeout %v is below 1s: a live relay waiting for the database would lose the lead", cfg.SessionTimeout)
	}
	if cfg.LockRetryInterval >= cfg.SessionTimeout {
		return nil, fmt.Errorf("outbox: New: LockRetryInterval %v must be shorter than SessionTimeout %v, or the database ends a standby's session between two tries",
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
	}, nil
}

// Name implements host.Runner.
func (r *Relay) Name() string { return "outbox-relay" }

// Run relays every topic until ctx is cancelled, then returns nil. Failures
// of the broker or the database end the topic's term as active relay; it
// backs off and competes for the lock again. A topic with no outbox table
// is a deployment that skipped `pin migrate up` for it: that topic waits,
// logged at ERROR with its name and the fix, and the others are relayed.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, topic := range r.cfg.Topics {
		wg.Go(func() {
			waits := backoff.Doubling(r.cfg.ReconnectBackoff, r.cfg.MaxReconnectBackoff)
			for !r.hasTable(ctx, topic) {
				wait := waits.NextBackOff()
				if !sleep(ctx, wait) {
					return
				}
			}
			waits.Reset()
			for {
				started := time.Now()
				err := r.relay(ctx, topic)
				if ctx.Err() != nil {
					return
				}
				if time.Since(started) > time.Minute {
					waits.Reset() // it had been healthy
				}
				wait := waits.NextBackOff()
				r.logger.WarnContext(ctx, "outbox relay paused", "topic", topic, "err", err, "retry_in", wait)
				if !sleep(ctx, wait) {
					return
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// hasTable reports whether topic has its outbox table, logging at ERROR
// when it has none. A database that does not answer is no reason to wait:
// the term retries it.
func (r *Relay) hasTable(ctx context.Context, topic string) bool {
	check, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	err := store.CheckTopics(check, r.db, []string{topic})
	if errors.Is(err, store.ErrNoTopicTable) {
		r.logger.ErrorContext(ctx, "outbox relay: a topic has no outbox table; it waits, the other topics are relayed", "topic", topic, "err", err)
		return false
	}
	if err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "outbox relay: could not check the topic's table", "topic", topic, "err", err)
	}
	return true
}

// relay is one term of this instance for topic: it waits until it holds the
// topic's advisory lock (leader.go), then sends (send.go) until ctx ends
// (nil) or something fails (the error). The lock is a session lock on conn,
// so it ends with the session: when this process dies, freezes or its
// connection is cut, PostgreSQL releases it and a standby's next try
// succeeds. Every acknowledgement runs on conn, so a relay whose session
// ended acknowledges nothing.
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
	return r.send(ctx, conn, topic)
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
