package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// RowSeparator joins a topic's columns into one text element each in the
// events parameter of outbox.publish: the ASCII record separator, which
// JSON text holds only escaped (RFC 8259 §7).
const RowSeparator = "\x1e"

// publishQuery stores events without a change of the caller's: the one
// statement of Write. outbox.publish (migrations/00012_outbox_messages.sql)
// is the only code that inserts outbox rows.
const publishQuery = `SELECT outbox.publish($1)`

// Event is one message bound for the outbox table of its Kafka topic.
type Event struct {
	Topic   string
	Message *message.Message
}

// Events binds msgs, in order, to topic.
func Events(topic string, msgs ...*message.Message) []Event {
	out := make([]Event, len(msgs))
	for i, m := range msgs {
		out[i] = Event{Topic: topic, Message: m}
	}
	return out
}

// Prepared is a change's events, checked and encoded as the events
// parameter of outbox.publish, with each topic's publication span open
// until End.
type Prepared struct {
	events []string
	topics []string
	spans  []trace.Span
}

// Events is the value the caller's statement passes to
// outbox.publish(events, announced): groups of five elements, one per topic
// (the topic, then its messages' uuids, partition keys, payloads and
// metadata, each joined by RowSeparator, in message order).
func (p *Prepared) Events() []string { return p.events }

// End ends the publication spans, marked failed with err, the error of
// the statement that ran outbox.publish (nil when it succeeded).
func (p *Prepared) End(err error) {
	for _, s := range p.spans {
		if err != nil {
			s.RecordError(err)
			s.SetStatus(codes.Error, "outbox publish failed")
		}
		s.End()
	}
	p.spans = nil
}

// Prepare checks events for a change that writes the rows keys name, and
// encodes them for the caller's own statement, which calls
// outbox.publish(events, ARRAY(<the ids it wrote>)) so that the change and
// its events are one statement and each event is stored only with the row
// it announces. A message needs a UUID, a JSON payload and the
// kafka.MetaPartitionKey, MetaEventType and MetaContractVersion metadata,
// and its key must be one of keys (an event goes with its aggregate's
// row); one without them, whose UUID or key holds RowSeparator, or whose
// Kafka record would exceed kafka.MaxRecordBytes (ErrMessageTooLarge), is
// refused. Each topic's publication is traced, with the traceparent and,
// unless set, kafka.MetaCorrelationID (from ctx, else the UUID) added to its
// messages' metadata. The caller ends the spans with the statement's error
// (Prepared.End); on an error Prepare has ended them.
func (p *Publisher) Prepare(ctx context.Context, events []Event, keys []string) (*Prepared, error) {
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	for _, e := range events {
		if e.Message == nil {
			continue // checkMessage names it, under its topic's span
		}
		if key := e.Message.Metadata.Get(kafka.MetaPartitionKey); !known[key] {
			return nil, fmt.Errorf("outbox: publish to %s: message %s: its key %q names no row of the change (an event goes with its aggregate's row)",
				e.Topic, e.Message.UUID, key)
		}
	}
	return p.prepare(ctx, events)
}

// prepare groups events by topic, in order of first appearance, starts
// each topic's span, and encodes its messages.
func (p *Publisher) prepare(ctx context.Context, events []Event) (*Prepared, error) {
	var topics []string
	byTopic := map[string][]*message.Message{}
	for _, e := range events {
		if _, seen := byTopic[e.Topic]; !seen {
			// Once per topic, not per event: its regular expressions were a
			// large batch's biggest cost after marshalling (performance.md).
			if err := CheckTopic(e.Topic); err != nil {
				return nil, err
			}
			topics = append(topics, e.Topic)
		}
		byTopic[e.Topic] = append(byTopic[e.Topic], e.Message)
	}
	prepared := &Prepared{topics: topics, events: make([]string, 0, 5*len(topics))}
	for _, topic := range topics {
		msgs := byTopic[topic]
		span, err := p.start(ctx, topic, msgs) // on its error, it has ended its own span
		if err != nil {
			prepared.End(err)
			return nil, err
		}
		prepared.spans = append(prepared.spans, span)
		prepared.events = append(prepared.events, encode(topic, msgs)...)
	}
	return prepared, nil
}

// Write stores events inside tx, for a caller whose change is not one
// statement with them (a snapshot's redelivery, a test): one statement
// (publishQuery), so they commit or roll back with tx whatever their
// topics, and postgres.Autocommit makes it a transaction of its own.
// Messages are checked and traced as Prepare does, without its keys.
func (p *Publisher) Write(ctx context.Context, tx postgres.Tx, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	if !tx.Valid() {
		return errors.New("outbox: write outside a transaction")
	}
	prepared, err := p.prepare(ctx, events)
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, publishQuery, prepared.Events()); err != nil {
		err = fmt.Errorf("outbox: publish to %s: %w", strings.Join(prepared.topics, ", "), err)
	}
	prepared.End(err)
	return err
}

// WriteWith runs query, one of the caller's literal statements, with args
// and events (Prepare's value) as @events inside tx, and returns the ids
// query returns. query writes the rows keys name and ends with
//
//	published AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM <written>)))
//	SELECT id FROM <written>, published
//
// so the change and its events are one statement and an event is stored
// only with the row it announces; package outboxrules checks every module's
// statements for it. The spans end with the statement's error.
func (p *Publisher) WriteWith(ctx context.Context, tx postgres.Tx, query string, args pgx.NamedArgs, keys []string, events []Event) ([]string, error) {
	prepared, err := p.Prepare(ctx, events, keys)
	if err != nil {
		return nil, err
	}
	args["events"] = prepared.Events()
	ids, err := QueryIDs(ctx, tx, query, args)
	prepared.End(err)
	return ids, err
}

// QueryIDs runs a statement that returns ids, as text. A refusal may
// surface only once a row is read, so the rows' error is the statement's.
func QueryIDs(ctx context.Context, tx postgres.Tx, query string, args pgx.NamedArgs) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, errors.Join(rows.Err(), rows.Close())
}

// encode is topic's five elements of the events parameter: the topic, then
// msgs' columns, each joined by RowSeparator.
func encode(topic string, msgs []*message.Message) []string {
	uuids, keys := make([]string, len(msgs)), make([]string, len(msgs))
	size := 0
	for _, msg := range msgs {
		size += len(msg.Payload) + len(RowSeparator)
	}
	var payloads strings.Builder
	payloads.Grow(size)
	var metadata []byte
	for i, msg := range msgs {
		if i > 0 {
			payloads.WriteString(RowSeparator)
			metadata = append(metadata, RowSeparator...)
		}
		uuids[i], keys[i] = msg.UUID, msg.Metadata.Get(kafka.MetaPartitionKey)
		payloads.Write(msg.Payload)
		metadata = appendMetadata(metadata, msg.Metadata)
	}
	return []string{topic, strings.Join(uuids, RowSeparator), strings.Join(keys, RowSeparator),
		payloads.String(), string(metadata)}
}

// ErrMessageTooLarge is wrapped, as a *MessageTooLargeError, by Prepare and
// Write when a message's Kafka record would exceed kafka.MaxRecordBytes: no
// broker would take it, so it is refused before anything is stored.
var ErrMessageTooLarge = errors.New("message too large for Kafka")

// MessageTooLargeError is the error of a message refused for its size: its
// record's bytes as the relay's producer counts them (kafka.RecordBytes) or,
// for a row the relay leaves unread, its payload's, and the limit.
type MessageTooLargeError struct {
	MessageID    string
	Bytes, Limit int
}

// Error implements error.
func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("message %s: %d bytes, more than the %d a Kafka record may have: %v",
		e.MessageID, e.Bytes, e.Limit, ErrMessageTooLarge)
}

// Unwrap makes errors.Is(err, ErrMessageTooLarge) hold.
func (e *MessageTooLargeError) Unwrap() error { return ErrMessageTooLarge }

// checkSize refuses a message whose record the relay's producer would
// refuse (kafka.ProducerConfig's Producer.MaxMessageBytes).
func checkSize(kafkaTopic string, msg *message.Message) error {
	n, err := kafka.RecordBytes(kafkaTopic, msg)
	if err != nil {
		return err
	}
	if n > kafka.MaxRecordBytes {
		return &MessageTooLargeError{MessageID: msg.UUID, Bytes: n, Limit: kafka.MaxRecordBytes}
	}
	return nil
}
