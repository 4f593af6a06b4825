package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// RowSeparator joins a Batch's columns into one text parameter each: the
// ASCII record separator, which JSON text holds only escaped (RFC 8259 §7).
const RowSeparator = "\x1e"

// insertQuery is the one statement that writes outbox rows, in
// watermill-sql's queue schema (SchemaAdapter), which the relay reads. The
// table (%[1]s, TableName) and the parameter numbers (%[2]d..%[5]d: the
// Batch's Args) are its only generated parts. Each column travels as one
// text parameter (one copy to send, not an array of hundreds of elements)
// and is split here. Alone, rows go in in message order, so "offset" keeps
// each key's order; narrowed by announcedGuard, their order is the plan's,
// so such a statement must carry one message per key.
const insertQuery = `INSERT INTO %[1]s (uuid, payload, metadata)
SELECT m.uuid, m.payload::json, m.metadata::json
FROM unnest(string_to_array($%[2]d, E'\x1e'), string_to_array($%[3]d, E'\x1e'),
	string_to_array($%[4]d, E'\x1e'), string_to_array($%[5]d, E'\x1e')) AS m(uuid, key, payload, metadata)`

// announcedGuard narrows insertQuery, inside a caller's statement, to the
// messages whose partition key is an id the caller's CTE %[1]s returns: an
// event is stored only with the change it announces.
const announcedGuard = `
WHERE m.key IN (SELECT id::text FROM %[1]s)`

// Batch is one topic's messages readied for its outbox table by
// Publisher.Ready: checked, traced, and encoded as insertQuery's parameters.
// The caller either runs Insert in its transaction, or puts CTE into a
// statement of its own, runs it, and calls Done with its error.
type Batch struct {
	table                           string
	uuids, keys, payloads, metadata string
	span                            trace.Span
	publisher                       *Publisher
	topic                           string
}

// Publish inserts msgs into the outbox table of kafkaTopic inside tx, so
// they commit or roll back with the caller's change: Ready, then Insert.
// A message needs a UUID, a JSON payload and the kafka.MetaPartitionKey,
// MetaEventType and MetaContractVersion metadata: one without them, or
// whose Kafka record would exceed kafka.MaxRecordBytes (ErrMessageTooLarge),
// is refused rather than dead-lettered later, and nothing is stored. For
// several topics, call it once per topic with the same tx.
func (p *Publisher) Publish(ctx context.Context, tx postgres.Tx, kafkaTopic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if tx.Exec == nil {
		return errors.New("outbox: publish outside a transaction")
	}
	b, err := p.Ready(ctx, kafkaTopic, msgs...)
	if err != nil {
		return err
	}
	return b.Insert(ctx, tx)
}

// Ready checks msgs, starts the publication's span, adds its traceparent
// and, unless set, kafka.MetaCorrelationID (from ctx, else the UUID, so it
// is never empty) to their metadata, and encodes them for kafkaTopic's
// table. The payload is parsed by the table's json column on insert: one
// that is not JSON fails the insert, before anything is stored.
func (p *Publisher) Ready(ctx context.Context, kafkaTopic string, msgs ...*message.Message) (*Batch, error) {
	if err := checkTopic(kafkaTopic); err != nil {
		return nil, err
	}
	span, err := p.start(ctx, kafkaTopic, msgs)
	if err != nil {
		return nil, err
	}
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
	return &Batch{table: TableName(kafkaTopic), span: span, publisher: p, topic: kafkaTopic,
		uuids: strings.Join(uuids, RowSeparator), keys: strings.Join(keys, RowSeparator),
		payloads: payloads.String(), metadata: string(metadata)}, nil
}

// ErrMessageTooLarge is wrapped, as a *MessageTooLargeError, by Publish and
// Ready when a message's Kafka record would exceed kafka.MaxRecordBytes: no
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

// Insert writes the batch by a statement of its own inside tx and ends
// it.
func (b *Batch) Insert(ctx context.Context, tx postgres.Tx) error {
	if tx.Exec == nil {
		return b.Done(errors.New("insert outside a transaction"))
	}
	_, err := tx.Exec.ExecContext(ctx, fmt.Sprintf(insertQuery, b.table, 1, 2, 3, 4), b.Args()...)
	return b.Done(err)
}

// CTE is the batch's insert as the data-modifying CTE name of a caller's
// statement (`name AS (INSERT …)`), taking Args as the parameters $first to
// $first+3. It inserts only the messages whose partition key is the id of a
// row the caller's CTE announced returns (RETURNING id), in no guaranteed
// order: one message per key. The caller runs the statement and calls Done
// with its error.
func (b *Batch) CTE(name, announced string, first int) string {
	return name + " AS (" + fmt.Sprintf(insertQuery, b.table, first, first+1, first+2, first+3) +
		fmt.Sprintf(announcedGuard, announced) + ")"
}

// Args are the parameters of the batch's insert, in the order CTE numbers
// them.
func (b *Batch) Args() []any { return []any{b.uuids, b.keys, b.payloads, b.metadata} }

// Done ends the publication's span, recording err, and returns err
// wrapped with the topic, or nil.
func (b *Batch) Done(err error) error {
	defer b.span.End()
	if err != nil {
		return b.publisher.fail(b.span, b.topic, err)
	}
	return nil
}
