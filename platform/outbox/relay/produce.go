package relay

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/IBM/sarama"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/codes"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
)

// Producing a claimed batch: in waves that keep each key's order, every
// message of a wave at once. A message no broker will ever take is
// dead-lettered at once, without a retry (a retry would only hold the batch
// open); a failure of the broker ends the round (send.go acknowledges what
// went through). See docs/adr/0015-a-message-kafka-never-takes.md.

// publish sends rows to Kafka in waves: a wave holds at most one row per key
// and is sent at once (Sarama gathers the concurrent sends into a few
// produce requests), and the next wave starts when it is acknowledged, so
// the records of a key reach their partition in outbox order. A key with a
// row to dead-letter is held from then on: its later rows are neither sent
// nor acknowledged, and the next read leaves them (held.go). It returns the
// offsets Kafka acknowledged and the messages to dead-letter; on a failure
// of the broker, or once ctx ended (the lead lost), it stops there and
// returns the error as well.
func (r *Relay) publish(ctx context.Context, producer *wmkafka.Publisher, topic string, rows []outboxRow) (acked []int64, dead []deadLetter, err error) {
	held := map[string]bool{}
	for _, wave := range waves(rows) {
		if ctx.Err() != nil {
			return acked, dead, context.Cause(ctx) // the lead is lost: send no more
		}
		wave = slices.DeleteFunc(wave, func(row outboxRow) bool { return held[key(row)] })
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
			err, attempts := errs[i], 1
			if len(wave) > 1 && refusedBatch(err) {
				// The broker refuses a record batch whole, and this one may
				// have shared it with the culprit: sent alone, it is judged
				// alone.
				err, attempts = r.produce(producer, topic, row.msg), 2
			}
			switch reason := deadReason(row, err); {
			case err == nil:
				acked = append(acked, row.offset)
			case reason != "":
				dead = append(dead, deadLetter{row: row, err: err, attempts: attempts, reason: reason})
				held[key(row)] = key(row) != "" // a row without a key holds nothing: nothing follows it
			default:
				transient = errors.Join(transient, err)
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
		i := nth[key(row)]
		nth[key(row)]++
		if i == len(out) {
			out = append(out, nil)
		}
		out[i] = append(out[i], row)
	}
	return out
}

// key is row's Kafka key, "" when it has none.
func key(row outboxRow) string { return row.msg.Metadata.Get(kafka.MetaPartitionKey) }

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

// Reasons a message is dead-lettered: the first word of its dead letter's
// error and the reason of the log line.
const (
	// ReasonTooLarge: its payload alone or its record exceeds the
	// producer's Producer.MaxMessageBytes, or the broker answered
	// MESSAGE_TOO_LARGE (the topic's max.message.bytes) to the record alone.
	ReasonTooLarge = "too_large"
	// ReasonInvalid: the row is no message (unreadable metadata, no key, no
	// id), or the broker refused the record alone as invalid or corrupt.
	ReasonInvalid = "invalid"
)

// deadReason is why row, which failed with err, can never be sent, or ""
// when err is no fault of the message (the broker's or the connection's)
// and the round must end instead.
func deadReason(row outboxRow, err error) string {
	var cfgErr sarama.ConfigurationError // larger than Producer.MaxMessageBytes
	switch {
	case err == nil:
		return ""
	case errors.Is(err, outbox.ErrMessageTooLarge), errors.As(err, &cfgErr):
		return ReasonTooLarge
	case row.bad != nil, errors.Is(err, kafka.ErrNoPartitionKey), errors.Is(err, kafka.ErrNoMessageID):
		return ReasonInvalid
	}
	return brokerRefusal(err)
}

// brokerRefusal is the reason of a broker's refusal that no retry changes,
// or "". The broker judges a record batch, so every message that shared
// the batch gets it (refusedBatch).
func brokerRefusal(err error) string {
	var kerr sarama.KError
	if !errors.As(err, &kerr) {
		return ""
	}
	switch kerr {
	case sarama.ErrMessageSizeTooLarge, sarama.ErrMessageSetSizeTooLarge:
		return ReasonTooLarge
	case sarama.ErrInvalidRecord, sarama.ErrInvalidMessage, sarama.ErrInvalidMessageSize:
		return ReasonInvalid
	}
	return ""
}

// refusedBatch reports whether err is a broker's refusal of the record
// batch the message went in, rather than of the message itself.
func refusedBatch(err error) bool { return brokerRefusal(err) != "" }
