package outbox

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
)

// Forwarding a poll as one batch.
//
// watermill-sql's subscriber reads up to BatchSize rows in one transaction
// and hands them to the forwarder one at a time, waiting for each to be
// acknowledged before it offers the next; once all are acknowledged it asks
// the offsets adapter for the query that stores the new position, runs it
// and commits. Publishing each message through watermill-kafka there (a
// Sarama SendMessage per message) costs one produce round trip per message
// (acks=all, one request in flight): about 1 800 events/s on the 2-core
// benchmark machine, with the CPU mostly idle (docs/performance.md).
//
// So in batch mode the forwarder's handler only checks that the record
// encodes and adds the message to the poll's pending batch, and the position
// query waits until the whole batch is on Kafka: every message of the batch
// is published through the watermill-kafka publisher at once, from its own
// goroutine, and Sarama's producer gathers the concurrent sends into a few
// produce requests instead of one per message. The guarantees stay those of
// docs/adr/0002-outbox.md:
//
//   - at least once: the position is stored only after every record of the
//     batch was acknowledged; if any failed, the position query fails and
//     the poll's transaction rolls back, so the poll is read again — after
//     a broker failure by a new session (as for a single message before);
//   - order per key: a batch never holds two records of one key — a record
//     whose key is already pending sends the pending batch first — so
//     whatever Kafka does with a failed batch (some records written, some
//     not), the first copy of every record of a key still arrives in commit
//     order; and the next batch is only read once this one is stored;
//   - poison messages: one that cannot be encoded fails in the handler, as
//     before, and goes to the dead-letter table after MaxAttempts. One that
//     Kafka refuses fails the batch; the topic then forwards the poll again
//     one message at a time (with retries and dead-lettering per message),
//     and goes back to batches once a poll succeeds. Records of that batch
//     that Kafka took are sent again then (at least once).
type pollBatch struct {
	topic string
	out   *kafkaOut
	// oneByOne is the topic's mode, kept by the Forwarder across sessions.
	oneByOne *atomic.Bool
	// endSession stops the forwarding session with its cause.
	endSession func(error)

	mu      sync.Mutex
	pending []pendingRecord
	keys    map[string]struct{}
}

// pendingRecord is a message waiting for the batch to be sent, with the
// span of its forwarding.
type pendingRecord struct {
	msg  *message.Message
	span trace.Span
}

func newPollBatch(topic string, out *kafkaOut, oneByOne *atomic.Bool, endSession func(error)) *pollBatch {
	return &pollBatch{topic: topic, out: out, oneByOne: oneByOne, endSession: endSession, keys: map[string]struct{}{}}
}

// reset drops what a poll that never reached its position query left
// behind: it rolled back, and its rows will be read again.
func (b *pollBatch) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pending {
		p.span.End()
	}
	b.pending = b.pending[:0]
	clear(b.keys)
}

// add encodes msg and adds it to the batch. An encoding failure is the
// message's own (the guard retries it and dead-letters it). If the batch
// already holds a record of msg's key, the batch is sent first.
func (b *pollBatch) add(msg *message.Message) error {
	span := startForwardSpan(msg, b.out.tracer, b.topic)
	// Encode now only to catch a message that can never be sent while it
	// can still be dead-lettered alone; the publisher encodes it again.
	if _, err := (kafka.Marshaler{}).Marshal(b.topic, msg); err != nil {
		b.out.failed(b.topic, span, err)
		span.End()
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := msg.Metadata.Get(MetaPartitionKey)
	if _, dup := b.keys[key]; dup {
		if err := b.sendLocked(); err != nil {
			// Whatever failed, it was not msg: end the session, so that the
			// guard does not count it against msg, and read the poll again.
			span.End()
			err = &transientError{err: err}
			b.endSession(err)
			return err
		}
	}
	b.keys[key] = struct{}{}
	b.pending = append(b.pending, pendingRecord{msg: msg, span: span})
	return nil
}

// send publishes the pending batch; the subscriber calls it (through
// flushingOffsets) before it stores the poll's position.
func (b *pollBatch) send() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.oneByOne.Load() {
		// The poll went one message at a time and every message was
		// forwarded or dead-lettered: back to batches.
		b.oneByOne.Store(false)
	}
	err := b.sendLocked()
	var refused *refusedError
	if err != nil && !errors.As(err, &refused) {
		// The broker or the connection: a new session, with backoff.
		err = &transientError{err: err}
		b.endSession(err)
	}
	return err
}

// refusedError is a batch of which Kafka refused a record for the record's
// own sake. The poll is read again (one message at a time) in the same
// session.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// sendLocked sends the pending batch and empties it. An error means that
// at least one record is not on Kafka; the position must not move.
func (b *pollBatch) sendLocked() error {
	if len(b.pending) == 0 {
		return nil
	}
	// The keys of a batch are distinct, so the order in which the
	// concurrent sends reach a partition does not matter.
	errs := make([]error, len(b.pending))
	var wg sync.WaitGroup
	for i, p := range b.pending {
		wg.Go(func() { errs[i] = b.out.producer.Publish(b.topic, p.msg) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	messageFault := false
	for i, p := range b.pending {
		if errs[i] == nil {
			b.out.metrics.published.WithLabelValues(b.topic).Inc()
		} else {
			b.out.failed(b.topic, p.span, errs[i])
			messageFault = messageFault || isMessageError(errs[i])
		}
		p.span.End()
	}
	n := len(b.pending)
	b.pending = b.pending[:0]
	clear(b.keys)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("forward a batch of %d to %s: %w", n, b.topic, err)
	if messageFault {
		// Kafka refused a record of its own accord: forward this poll one
		// message at a time so that the guard can set it aside.
		b.oneByOne.Store(true)
		return &refusedError{err: err}
	}
	return err
}

// failed counts and records a failed publication on its span.
func (k *kafkaOut) failed(topic string, span trace.Span, err error) {
	k.metrics.errors.WithLabelValues(topic).Inc()
	span.RecordError(err)
	span.SetStatus(codes.Error, "forward to Kafka failed")
}

// flushingOffsets is the outbox offsets adapter whose position query first
// sends the poll's batch: if that fails, so does the query, and the poll's
// transaction rolls back with the position where it was.
type flushingOffsets struct {
	watermillsql.DefaultPostgreSQLOffsetsAdapter
	batch *pollBatch
}

func (a flushingOffsets) AckMessageQuery(params watermillsql.AckMessageQueryParams) (watermillsql.Query, error) {
	if err := a.batch.send(); err != nil {
		return watermillsql.Query{}, err
	}
	return a.DefaultPostgreSQLOffsetsAdapter.AckMessageQuery(params)
}
