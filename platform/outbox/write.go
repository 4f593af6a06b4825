package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// RowSeparator joins a topic's columns into one text parameter each: the
// ASCII record separator, which JSON text holds only escaped (RFC 8259 §7).
const RowSeparator = "\x1e"

// insertTemplate is the one statement that writes outbox rows, in
// watermill-sql's queue schema (SchemaAdapter), which the relay reads. Its
// only generated parts are the table (%[1]s, TableName) and the number of
// its topic in a Change (%[2]d), which names its parameters; each topic's
// statement is built once (insertStatement, NewChange). Each column
// travels as one text parameter (one copy to send, not an array of hundreds
// of elements) and is split here. Rows go in in message order, so "offset"
// keeps each key's order.
const insertTemplate = `INSERT INTO %[1]s (uuid, payload, metadata)
SELECT m.uuid, m.payload::json, m.metadata::json
FROM unnest(string_to_array(@outbox_%[2]d_uuids, E'\x1e'), string_to_array(@outbox_%[2]d_keys, E'\x1e'),
	string_to_array(@outbox_%[2]d_payloads, E'\x1e'), string_to_array(@outbox_%[2]d_metadata, E'\x1e')) AS m(uuid, key, payload, metadata)`

// announcedGuard narrows a topic's insert, inside a Change, to the events
// whose partition key is an id the change's CTE %[1]s returned: an event is
// stored only with the row it announces (one a version guard skipped gets
// none). Their order is then the plan's: one event per key.
const announcedGuard = `
WHERE m.key IN (SELECT id::text FROM %[1]s)`

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

// Change is a caller's data-modifying statement composed with the outbox
// inserts of its events, so a change and its events are one statement (one
// round trip). The caller names and writes its half; the outbox writes its
// own. Build it once, at start-up (NewChange).
type Change struct {
	name   string
	query  string
	topics map[string]int // a topic's number in query
}

// NewChange composes the statement name from head, the caller's literal
// `WITH … AS (… RETURNING id)[, …]` whose CTE announced returns the ids of
// the rows it wrote, then one insert per topic, each narrowed by
// announcedGuard, then `SELECT id FROM announced`. The caller's named
// parameters must not start with outbox_, which names the outbox's.
func NewChange(name, head, announced string, topics ...string) (*Change, error) {
	if name == "" || announced == "" || len(topics) == 0 || !strings.HasPrefix(strings.TrimSpace(stripComments(head)), "WITH") {
		return nil, fmt.Errorf("outbox: change %q: a name, a WITH head, its announcing CTE and a topic are required", name)
	}
	if strings.Contains(head, "@outbox_") {
		return nil, fmt.Errorf("outbox: change %q: parameters named outbox_… are the outbox's", name)
	}
	c := &Change{name: name, topics: make(map[string]int, len(topics))}
	var q strings.Builder
	q.WriteString(strings.TrimRight(head, "\n\t "))
	for i, topic := range topics {
		if err := checkTopic(topic); err != nil {
			return nil, err
		}
		if _, dup := c.topics[topic]; dup {
			return nil, fmt.Errorf("outbox: change %q: topic %s given twice", name, topic)
		}
		c.topics[topic] = i
		fmt.Fprintf(&q, ",\noutbox_%d AS (%s%s)", i, fmt.Sprintf(insertTemplate, TableName(topic), i), fmt.Sprintf(announcedGuard, announced))
	}
	fmt.Fprintf(&q, "\nSELECT id FROM %s", announced)
	c.query = q.String()
	return c, nil
}

// Query is the composed statement, whole, for a reader or a plan test.
func (c *Change) Query() string { return c.query }

// stripComments drops the -- comment lines a literal .sql file starts with.
func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Write is what Publisher.Write stores.
type Write struct {
	// Events are the messages to store, in order per topic.
	Events []Event
	// Change, when set, is the caller's statement the events go with; each
	// event is stored only if the row its key names was written.
	Change *Change
	// Args are Change's named parameters.
	Args pgx.NamedArgs
	// Keys are the ids of the rows Change may write: an event whose
	// partition key is none of them is refused, never silently dropped.
	Keys []string
}

// plainInserts are the per-topic inserts of a Write without a Change, each
// built once from insertTemplate.
var plainInserts sync.Map // topic -> string

func insertStatement(topic string) string {
	if q, ok := plainInserts.Load(topic); ok {
		return q.(string)
	}
	q, _ := plainInserts.LoadOrStore(topic, fmt.Sprintf(insertTemplate, TableName(topic), 0))
	return q.(string)
}

// Write stores w's events inside tx, so they commit or roll back with the
// caller's change, and is done: nothing is left for the caller to finish.
// Without a Change it runs one insert per topic; with one, the change and
// every insert are one statement, and it returns the ids the change wrote.
// tx may be postgres.Autocommit only when that makes one statement (a
// Change, or one topic): the statement is then the transaction.
// A message needs a UUID, a JSON payload and the kafka.MetaPartitionKey,
// MetaEventType and MetaContractVersion metadata: one without them, or
// whose Kafka record would exceed kafka.MaxRecordBytes (ErrMessageTooLarge),
// is refused and nothing is stored. Each topic's publication is traced, with
// the traceparent and, unless set, kafka.MetaCorrelationID (from ctx, else
// the UUID) added to its messages' metadata.
func (p *Publisher) Write(ctx context.Context, tx postgres.Tx, w Write) ([]string, error) {
	if w.Change == nil && len(w.Events) == 0 {
		return nil, nil
	}
	if !tx.Valid() {
		return nil, errors.New("outbox: write outside a transaction")
	}
	topics, byTopic, err := groupByTopic(w)
	if err != nil {
		return nil, err
	}
	if tx.Autocommit() && w.Change == nil && len(topics) > 1 {
		return nil, fmt.Errorf("outbox: %d topics are %d statements, and an autocommit Tx makes each its own transaction", len(topics), len(topics))
	}
	args := pgx.NamedArgs{}
	for k, v := range w.Args {
		args[k] = v
	}
	spans := make([]trace.Span, 0, len(topics))
	end := func(err error) error { // records err on every topic's span
		for i, s := range spans {
			if err != nil {
				_ = p.fail(s, topics[i], err)
			}
			s.End()
		}
		return err
	}
	for _, topic := range topics {
		msgs := byTopic[topic]
		span, err := p.start(ctx, topic, msgs)
		if err != nil {
			return nil, end(err)
		}
		spans = append(spans, span)
		n := 0
		if w.Change != nil {
			n = w.Change.topics[topic]
		}
		encode(args, n, msgs)
		if w.Change == nil {
			if _, err := tx.ExecContext(ctx, insertStatement(topic), args); err != nil {
				return nil, end(fmt.Errorf("outbox: publish to %s: %w", topic, err))
			}
		}
	}
	if w.Change == nil {
		return nil, end(nil)
	}
	for topic, n := range w.Change.topics {
		if _, ok := byTopic[topic]; !ok {
			encode(args, n, nil)
		}
	}
	ids, err := queryIDs(ctx, tx, w.Change.query, args)
	if err != nil {
		return nil, end(fmt.Errorf("outbox: %s: %w", w.Change.name, err))
	}
	return ids, end(nil)
}

// groupByTopic checks w's events and groups their messages by topic, the
// topics in order of first appearance.
func groupByTopic(w Write) ([]string, map[string][]*message.Message, error) {
	var keys map[string]bool
	if w.Change != nil {
		keys = make(map[string]bool, len(w.Keys))
		for _, k := range w.Keys {
			keys[k] = true
		}
	}
	var topics []string
	byTopic := map[string][]*message.Message{}
	for _, e := range w.Events {
		if err := checkTopic(e.Topic); err != nil {
			return nil, nil, err
		}
		if e.Message == nil {
			return nil, nil, fmt.Errorf("outbox: publish to %s: nil message", e.Topic)
		}
		if w.Change != nil {
			if _, ok := w.Change.topics[e.Topic]; !ok {
				return nil, nil, fmt.Errorf("outbox: %s: topic %s is not one of the change's", w.Change.name, e.Topic)
			}
			if key := e.Message.Metadata.Get(kafka.MetaPartitionKey); !keys[key] {
				return nil, nil, fmt.Errorf("outbox: %s: message %s: its key %q names no row of the change (an event goes with its aggregate's row)",
					w.Change.name, e.Message.UUID, key)
			}
		}
		if _, seen := byTopic[e.Topic]; !seen {
			topics = append(topics, e.Topic)
		}
		byTopic[e.Topic] = append(byTopic[e.Topic], e.Message)
	}
	return topics, byTopic, nil
}

// encode sets the parameters of topic n's insert to msgs' columns, each
// joined by RowSeparator.
func encode(args pgx.NamedArgs, n int, msgs []*message.Message) {
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
	prefix := fmt.Sprintf("outbox_%d_", n)
	args[prefix+"uuids"], args[prefix+"keys"] = strings.Join(uuids, RowSeparator), strings.Join(keys, RowSeparator)
	args[prefix+"payloads"], args[prefix+"metadata"] = payloads.String(), string(metadata)
}

// queryIDs runs a statement that returns ids, as text.
func queryIDs(ctx context.Context, tx postgres.Tx, query string, args pgx.NamedArgs) ([]string, error) {
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

// ErrMessageTooLarge is wrapped, as a *MessageTooLargeError, by Write when
// a message's Kafka record would exceed kafka.MaxRecordBytes: no broker
// would take it, so it is refused before anything is stored.
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
