package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/backoff"
	"github.com/pinmarket/pin/platform/consumer/inbox"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
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
	// Its auto-commit must stay on: it commits the offsets the runner marks.
	Sarama *sarama.Config
	// MaxBatch is the most records of one partition applied in one
	// transaction (default 200). A batch is what has already been fetched
	// when the previous one committed: nothing waits to fill it.
	MaxBatch int
	// MaxAttempts is how often Apply is tried before the record is
	// dead-lettered (default 5).
	MaxAttempts int
	// RetryBackoff is the wait after the first failed attempt, doubled after
	// each further one up to an hour (default 200ms); each wait is jittered
	// (platform/backoff).
	RetryBackoff time.Duration
	// LagInterval is how often the group's lag is asked of the broker for
	// pin_consumer_lag_records (default 15s).
	LagInterval time.Duration
	// Now is the clock of the delay metric (default time.Now).
	Now func() time.Time
	// TracerProvider receives a span per batch (tracing.go); the global
	// provider when nil.
	TracerProvider trace.TracerProvider
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
	if !cfg.Sarama.Consumer.Offsets.AutoCommit.Enable {
		return nil, errors.New("consumer: NewRunner: the Sarama config must auto-commit the marked offsets")
	}
	if err := cfg.Sarama.Validate(); err != nil {
		return nil, fmt.Errorf("consumer: NewRunner: %w", err)
	}
	if err := kafka.CheckGroupTimeouts(cfg.Sarama); err != nil {
		return nil, fmt.Errorf("consumer: NewRunner: %w", err)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 200
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	if cfg.LagInterval <= 0 {
		cfg.LagInterval = 15 * time.Second
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

// Run consumes until ctx is cancelled. A record's offset is marked only
// after its transaction committed, or it was skipped or dead-lettered, and
// Sarama commits only marked offsets. Only a fault of the database or the
// broker makes Run return (a dead letter that cannot be written even in its
// minimal form is one); the record is then delivered again after the host
// restarts the runner.
func (r *Runner[B]) Run(ctx context.Context) error {
	group, err := sarama.NewConsumerGroup(r.cfg.Brokers, r.cfg.Name, r.cfg.Sarama)
	if err != nil {
		return fmt.Errorf("consumer %s: consumer group: %w", r.cfg.Name, err)
	}
	defer func() {
		_ = group.Close() // commits the offsets marked last
		if instance := r.cfg.Sarama.Consumer.Group.InstanceId; instance != "" && ctx.Err() != nil {
			// A stop, not a crash: hand the partitions over now (ADR 0020).
			if err := kafka.LeaveStatic(r.cfg.Brokers, r.cfg.Sarama, r.cfg.Name, instance); err != nil {
				r.logger.WarnContext(context.WithoutCancel(ctx), "consumer group not left", "error", err)
			}
		}
	}()
	go func() {
		for err := range group.Errors() {
			r.logger.WarnContext(ctx, "consumer group error", "error", err)
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go r.watchLag(runCtx) // ends with runCtx, after at most one request of its own
	r.logger.InfoContext(ctx, "consumer started", "topic", r.cfg.Topic, "group", r.cfg.Name)
	// Consume returns at every rebalance; the loop joins the group again.
	for runCtx.Err() == nil {
		if err := group.Consume(runCtx, []string{r.cfg.Topic}, partitions[B]{r: r, ctx: runCtx, fail: cancel}); err != nil {
			cancel(err)
		}
	}
	if ctx.Err() == nil {
		return fmt.Errorf("consumer %s: %w", r.cfg.Name, context.Cause(runCtx))
	}
	return nil
}

// partitions is the sarama.ConsumerGroupHandler of a Runner: Sarama calls
// ConsumeClaim once per partition assigned, each in its own goroutine.
type partitions[B any] struct {
	r    *Runner[B]
	ctx  context.Context
	fail context.CancelCauseFunc
}

func (partitions[B]) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (partitions[B]) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim is the loop of one partition: take the records already
// fetched (at least one, at most MaxBatch), apply them in one transaction,
// and only then mark the last one's offset for Sarama's next commit.
func (p partitions[B]) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	batch := make([]*sarama.ConsumerMessage, 0, p.r.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil // revoked
			}
			batch = append(batch, m)
		case <-sess.Context().Done():
			return nil
		}
	fill:
		for len(batch) < p.r.cfg.MaxBatch {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if err := p.r.tracedBatch(p.ctx, batch); err != nil {
			p.fail(err) // unmarked: delivered again after the restart
			return err
		}
		sess.MarkMessage(batch[len(batch)-1], "")
	}
}

// processBatch takes one partition's batch to its end: the undecodable
// records dead-lettered, the others applied in one transaction. When that
// transaction fails for a record's reason, the events are processed one by
// one, so that only the failing one is retried and dead-lettered; for a
// fault of the database, the error is returned. A nil return means the
// batch's offsets may be marked.
func (r *Runner[B]) processBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) error {
	recs := make([]Record, 0, len(msgs))
	events := make([]Event[B], 0, len(msgs))
	for _, m := range msgs {
		rec := toRecord(m)
		e, ok, err := r.decode(ctx, rec)
		if err != nil {
			return err
		}
		if !ok {
			continue // skipped or dead-lettered
		}
		recs, events = append(recs, rec), append(events, e)
	}
	if len(events) == 0 {
		return nil
	}
	// A stop lets the transaction in flight commit or roll back whole.
	outs, err := r.apply(context.WithoutCancel(ctx), events)
	if err == nil {
		r.metrics.batch.WithLabelValues(r.cfg.Name).Observe(float64(len(events)))
		for i, out := range outs {
			r.count(ctx, out, events[i])
		}
		return nil
	}
	if postgres.FaultOf(err) == postgres.FaultOfDatabase {
		return r.databaseFault(recs[0], recs[len(recs)-1], err)
	}
	if len(events) > 1 {
		r.logger.WarnContext(ctx, "batch failed; applying its events one by one", "events", len(events), "error", err)
	}
	for i, e := range events {
		if err := r.process(ctx, recs[i], e); err != nil {
			return err
		}
	}
	return nil
}

// maxRetryWait caps the doubling of RetryBackoff: MaxAttempts bounds the
// retries, and the library needs a cap.
const maxRetryWait = time.Hour

// process applies one event in a transaction of its own, retrying while
// Apply fails, and dead-letters it when it keeps failing, unless the
// database is at fault.
func (r *Runner[B]) process(ctx context.Context, rec Record, e Event[B]) error {
	waits := backoff.Doubling(r.cfg.RetryBackoff, maxRetryWait)
	for attempt := 1; ; attempt++ {
		outs, err := r.apply(context.WithoutCancel(ctx), []Event[B]{e})
		if err == nil {
			r.metrics.batch.WithLabelValues(r.cfg.Name).Observe(1)
			r.count(ctx, outs[0], e)
			return nil
		}
		if postgres.FaultOf(err) == postgres.FaultOfDatabase {
			return r.databaseFault(rec, rec, err)
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
		case <-time.After(waits.NextBackOff()):
		}
	}
}

// databaseFault counts a batch, from first to last, that rolled back for a
// fault of the database and returns the error that restarts the runner: no
// record is to blame, so none is retried or dead-lettered, and the batch is
// delivered again. The host logs the error once.
func (r *Runner[B]) databaseFault(first, last Record, err error) error {
	r.metrics.dbFaults.WithLabelValues(r.cfg.Name).Inc()
	at := fmt.Sprintf("%s/%d@%d", first.Topic, first.Partition, first.Offset)
	if last.Offset != first.Offset {
		at += fmt.Sprintf("..%d", last.Offset)
	}
	return fmt.Errorf("fault of the database applying %s, rolled back: %w", at, err)
}

// apply runs one transaction for events, in their order: the inbox
// entries, the version guard and the handler's effects commit together or
// not at all. The kit's part is two statements for the whole batch
// (package inbox), and the handler gets the events that passed the guard in
// one call.
func (r *Runner[B]) apply(ctx context.Context, events []Event[B]) ([]outcome, error) {
	outs := make([]outcome, len(events))
	entries := make([]inbox.Entry, len(events))
	for i, e := range events {
		entries[i] = inbox.Entry{MessageID: e.MessageID, AggregateID: e.AggregateID, Version: e.Version}
	}
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Through the connection, not GORM, which would expand the slices.
		conn := tx.Statement.ConnPool
		verdicts, lastVersions, err := inbox.Guard(ctx, conn, r.cfg.Name, entries)
		if err != nil {
			return err
		}
		guarded := make([]Guarded[B], 0, len(events))
		for i, e := range events {
			switch verdicts[i] {
			case inbox.Duplicate:
				outs[i] = outcomeDuplicate
			case inbox.Stale:
				outs[i] = outcomeStale
			default:
				outs[i] = outcomeApplied
				guarded = append(guarded, Guarded[B]{Event: e, LastVersion: lastVersions[i]})
			}
		}
		if len(guarded) == 0 {
			return nil
		}
		if err := r.handler.Apply(ctx, tx, guarded); err != nil {
			return err
		}
		return inbox.Record(ctx, conn, r.cfg.Name, entries, verdicts)
	})
	return outs, err
}

func (r *Runner[B]) count(ctx context.Context, out outcome, e Event[B]) {
	name := r.cfg.Name
	r.metrics.consumed.WithLabelValues(name).Inc()
	switch out {
	case outcomeApplied:
		// A snapshot is no change arriving late: its occurredAt may be days
		// old, and a rebuild would trip the delay alert.
		if e.Origin != OriginSnapshot {
			r.metrics.delay.WithLabelValues(name).Observe(r.cfg.Now().Sub(e.OccurredAt).Seconds())
		}
	case outcomeDuplicate:
		r.metrics.duplicates.WithLabelValues(name).Inc()
		r.logger.DebugContext(ctx, "duplicate skipped", "message_id", e.MessageID)
	case outcomeStale:
		r.metrics.stale.WithLabelValues(name).Inc()
		// A snapshot at the version already applied is the expected case, one
		// per purchase of a snapshot run: not worth a line at Info each.
		level := slog.LevelInfo
		if e.Origin == OriginSnapshot {
			level = slog.LevelDebug
		}
		r.logger.Log(ctx, level, "stale event skipped", "message_id", e.MessageID, "aggregate_id", e.AggregateID,
			"version", e.Version, "origin", e.Origin.String())
	case outcomeDeadLettered:
		r.metrics.deadLetters.WithLabelValues(name).Inc()
	case outcomeSkipped:
		r.metrics.skipped.WithLabelValues(name).Inc()
	}
}

// toRecord is the kit's view of a Sarama record.
func toRecord(m *sarama.ConsumerMessage) Record {
	headers := make(map[string]string, len(m.Headers))
	list := make([]Header, 0, len(m.Headers))
	for _, h := range m.Headers {
		if h != nil {
			headers[string(h.Key)] = string(h.Value)
			list = append(list, Header{Key: h.Key, Value: h.Value})
		}
	}
	return Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Headers: headers, HeaderList: list, Value: m.Value}
}
