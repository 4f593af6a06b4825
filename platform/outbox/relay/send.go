package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// The send: the active relay of a topic repeats one round on the session
// that holds the topic's lock — claim a batch of unacknowledged rows,
// produce them to Kafka (produce.go), acknowledge them, commit — until it is
// asked to stop or something fails. The lock and the session are leader.go's.

// send connects a Kafka producer and runs rounds on conn, the session
// holding topic's lock, until ctx ends (nil) or a round fails (the error).
// After a round that found rows it starts the next at once; after an empty
// one it pauses (pause), at most a heartbeat, since an idle leader's read is
// what keeps its session alive.
func (r *Relay) send(ctx context.Context, conn *sql.Conn, topic string) error {
	var producer *wmkafka.Publisher
	var err error
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

	quiet := 0            // empty reads in a row
	planned := time.Now() // when the session's plans were last forgotten
	for {
		if time.Since(planned) >= planLifetime {
			if err := r.forgetPlans(ctx, conn); err != nil {
				return fmt.Errorf("relay %s: %w", topic, err)
			}
			planned = time.Now()
		}
		n, err := r.round(ctx, conn, producer, topic)
		switch {
		case err != nil:
			return err
		case ctx.Err() != nil:
			// Asked to stop: the round in flight is done, the backlog is
			// the next active relay's (the host's stop has a deadline).
			return nil
		case n > 0:
			quiet = 0
			continue // traffic: look again at once
		case !sleep(ctx, min(r.pause(quiet), r.heartbeat())):
			return nil
		}
		quiet++
	}
}

// round claims up to BatchSize rows, produces them and acknowledges what
// Kafka took, in one transaction on conn; it returns how many rows it
// claimed. A round, once started, finishes even when ctx is cancelled: what
// went to Kafka is acknowledged rather than sent again. READ COMMITTED: the
// read takes its snapshot after the lock was granted, so it sees every
// acknowledgement of the previous holder.
func (r *Relay) round(ctx context.Context, conn *sql.Conn, producer *wmkafka.Publisher, topic string) (int, error) {
	start := time.Now()
	round, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxRound)
	defer cancel()
	tx, err := conn.BeginTx(round, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after a commit, a no-op
	rows, err := r.readBatch(round, tx, topic)
	if err != nil {
		return 0, fmt.Errorf("relay %s: %w", topic, err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	traced, span := r.startRoundSpan(round, topic, start, len(rows))
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
		// Kafka has them, the outbox does not know: the next active relay
		// sends them again.
		r.metrics.unacknowledged.WithLabelValues(topic).Add(float64(len(acked)))
		r.logger.WarnContext(ctx, "outbox acknowledgement failed after publishing",
			"topic", topic, "sent_again", len(acked), "err", err)
	}
	err = errors.Join(sendErr, err)
	endSpan(span, err, "relay round failed")
	if err != nil {
		return len(rows), fmt.Errorf("relay %s: %w", topic, err)
	}
	return len(rows), nil
}

// planLifetime is how long the session keeps the plans of its read and
// acknowledgement (store.PlanAsTheRelay): a plan at most this old, made
// for the outbox as it was then, instead of one per statement. Planning on
// the partitioned table for every round cost about a tenth of a drain's
// rounds; once a second is nothing.
const planLifetime = time.Second

// forgetPlans has the session plan its statements again on their next run.
func (r *Relay) forgetPlans(ctx context.Context, conn *sql.Conn) error {
	stmt, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	if err := store.ForgetPlans(stmt, conn); err != nil {
		return fmt.Errorf("forget plans: %w", err)
	}
	return nil
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
// timeouts of a failing broker): a round still running then is on a
// connection that stopped answering, and is given up.
const maxRound = 2 * time.Minute

// outboxRow is one unacknowledged row. bad is set when the row can never be
// sent (it is no message, or its payload is over the limit and was left
// unread); it then goes straight to the dead letters.
type outboxRow struct {
	offset   int64
	msg      *message.Message
	metadata []byte
	bad      error
}

// readBatch claims up to BatchSize unacknowledged rows of keys not held, in
// offset order (FOR UPDATE: a row is never published by two relays that
// both believe they are active). The payload of a row over the producer's
// limit stays in the database: the row can never be sent, and a batch of
// 200 of them would be 220 MB to read on every round.
func (r *Relay) readBatch(ctx context.Context, tx *sql.Tx, topic string) ([]outboxRow, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	limit := r.cfg.Sarama.Producer.MaxMessageBytes
	rows, err := store.ReadBatch(ctx, tx, topic, limit, r.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	out := make([]outboxRow, len(rows))
	for i, raw := range rows {
		row := outboxRow{offset: raw.Offset, msg: message.NewMessage(raw.UUID, raw.Payload), metadata: raw.Metadata}
		if len(row.metadata) > 0 {
			if err := json.Unmarshal(row.metadata, &row.msg.Metadata); err != nil {
				row.bad = fmt.Errorf("metadata is not a JSON object of strings: %w", err)
			}
		}
		if raw.Size > int64(limit) {
			row.bad = &outbox.MessageTooLargeError{MessageID: raw.UUID, Bytes: int(raw.Size), Limit: limit}
		}
		out[i] = row
	}
	return out, nil
}

// acknowledge marks the published rows acked and moves the dead letters
// aside (copy, then ack).
func (r *Relay) acknowledge(ctx context.Context, tx *sql.Tx, topic string, acked []int64, dead []deadLetter) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	if len(dead) > 0 {
		if err := insertDeadLetters(ctx, tx, topic, dead); err != nil {
			return err
		}
	}
	for _, d := range dead {
		r.logger.ErrorContext(ctx, "outbox message dead-lettered",
			"topic", topic, "outbox_offset", d.row.offset, "message_id", d.row.msg.UUID, "reason", d.reason, "attempts", d.attempts, "err", d.err)
		acked = append(acked, d.row.offset)
	}
	if len(acked) == 0 {
		return nil
	}
	if err := store.Ack(ctx, tx, topic, acked); err != nil {
		return fmt.Errorf("acknowledge: %w", err)
	}
	return nil
}
