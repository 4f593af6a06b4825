package outbox

import (
	"context"
	"errors"
	"sync"

	"github.com/IBM/sarama"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/codes"

	"github.com/pinmarket/pin/platform/backoff"
	"github.com/pinmarket/pin/platform/kafka"
)

// Producing a claimed batch: in waves that keep each key's order, every
// message of a wave at once; a message Kafka refuses for a reason of its own
// is retried alone and then dead-lettered, a failure of the broker ends the
// round (send.go acknowledges what went through).

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
			wg.Go(func() { errs[i] = r.produce(producer, topic, row.msg) })
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
// MaxAttempts is reached, pausing RetryBackoff, doubled each time (with jitter).
func (r *Relay) retry(ctx context.Context, producer *wmkafka.Publisher, topic string, msg *message.Message, err error) (attempts int, _ error) {
	pause := r.cfg.RetryBackoff
	for attempts = 1; attempts < r.cfg.MaxAttempts && isMessageError(err); attempts++ {
		if !sleep(ctx, backoff.Jitter(pause)) {
			return attempts, err
		}
		pause *= 2
		err = r.produce(producer, topic, msg)
	}
	return attempts, err
}

// produce publishes one message through watermill-kafka, counting and
// tracing it as a child of the publication that stored it.
func (r *Relay) produce(producer *wmkafka.Publisher, topic string, msg *message.Message) error {
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
