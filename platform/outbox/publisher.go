package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/postgres"
)

const instrumentation = "github.com/pinmarket/pin/platform/outbox"

// Publisher writes messages into the outbox inside the caller's transaction,
// so an event is stored if and only if the change it describes commits.
// It is safe for concurrent use.
type Publisher struct {
	logger watermill.LoggerAdapter
	tracer trace.Tracer
	schema watermillsql.PostgreSQLQueueSchema
}

// NewPublisher returns a Publisher that logs to logger and traces with tp.
func NewPublisher(logger *slog.Logger, tp trace.TracerProvider) (*Publisher, error) {
	if logger == nil {
		return nil, errors.New("outbox: NewPublisher: nil logger")
	}
	if tp == nil {
		return nil, errors.New("outbox: NewPublisher: nil tracer provider")
	}
	return &Publisher{
		logger: observability.WatermillLogger(logger),
		tracer: tp.Tracer(instrumentation),
		schema: SchemaAdapter(0),
	}, nil
}

// Publish inserts msgs into the outbox table of kafkaTopic inside tx, so
// they commit or roll back with the caller's change. A message needs a
// UUID, a JSON payload and the kafka.MetaPartitionKey, MetaEventType and
// MetaContractVersion metadata: one without them is refused here rather than
// dead-lettered later. Publish adds its span's traceparent and, unless set,
// kafka.MetaCorrelationID (from ctx, else the UUID, so it is never empty).
// For several topics, call it once per topic with the same tx.
func (p *Publisher) Publish(ctx context.Context, tx postgres.Tx, kafkaTopic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := checkTopic(kafkaTopic); err != nil {
		return err
	}
	if tx.Exec == nil {
		return errors.New("outbox: publish outside a transaction")
	}
	span, err := p.start(ctx, kafkaTopic, msgs, checkJSONPayload)
	if err != nil {
		return err
	}
	defer span.End()

	// A watermill-sql publisher bound to this transaction: one multi-row
	// insert of the plain messages into the topic's table.
	sqlPub, err := watermillsql.NewPublisher(tx.Exec, watermillsql.PublisherConfig{
		SchemaAdapter:        p.schema,
		AutoInitializeSchema: false,
	}, p.logger)
	if err != nil {
		return p.fail(span, kafkaTopic, err)
	}
	if err := sqlPub.Publish(kafkaTopic, msgs...); err != nil {
		return p.fail(span, kafkaTopic, err)
	}
	return nil
}

// start opens the publication's span and readies msgs for kafkaTopic's
// table: checked, with the traceparent and correlation id in their metadata.
func (p *Publisher) start(ctx context.Context, kafkaTopic string, msgs []*message.Message, checkPayload func(*message.Message) error) (trace.Span, error) {
	ctx, span := p.tracer.Start(ctx, "outbox publish "+kafkaTopic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", kafkaTopic),
			attribute.String("messaging.operation.type", "create"),
			attribute.Int("messaging.batch.message_count", len(msgs)),
		))
	// A background cycle's publication carries its run id (the expiry job's
	// design document asks for it on the publish span).
	if runID := observability.RunID(ctx); runID != "" {
		span.SetAttributes(attribute.String("pin.run_id", runID))
	}

	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	traceparent := carrier.Get(kafka.MetaTraceparent)
	correlationID := observability.CorrelationID(ctx)

	for _, msg := range msgs {
		if err := checkMessage(msg, checkPayload); err != nil {
			err = p.fail(span, kafkaTopic, err)
			span.End()
			return span, err
		}
		if traceparent != "" {
			msg.Metadata.Set(kafka.MetaTraceparent, traceparent)
		}
		if msg.Metadata.Get(kafka.MetaCorrelationID) == "" {
			id := correlationID
			if id == "" {
				id = msg.UUID
			}
			msg.Metadata.Set(kafka.MetaCorrelationID, id)
		}
		msg.SetContext(ctx)
	}
	if len(msgs) == 1 {
		span.SetAttributes(attribute.String("messaging.message.id", msgs[0].UUID))
	}

	return span, nil
}

// RowSeparator joins the payloads and the metadata of Rows: the ASCII
// record separator, which JSON text holds only escaped (RFC 8259 §7).
const RowSeparator = "\x1e"

// Rows are messages readied for one topic's outbox table, for a caller that
// inserts them with a statement of its own (in one round trip with the
// change they announce); Publish is the way for everyone else. Each column
// is one text parameter (one copy to send, not an array of hundreds of
// elements); Columns turns the three back into arrays.
type Rows struct {
	// Table is the topic's outbox table (TableName).
	Table string
	// UUIDs are the message UUIDs joined by ","; Payloads and Metadata are
	// the payload and metadata columns joined by RowSeparator; all in
	// message order.
	UUIDs, Payloads, Metadata string
	span                      trace.Span
	publisher                 *Publisher
	topic                     string
}

// Columns are the rows' three columns as arrays of text, for unnest(…),
// from the parameters $first (UUIDs), $first+1 (Payloads) and $first+2
// (Metadata), which Args gives in that order.
func (r *Rows) Columns(first int) string {
	return fmt.Sprintf(`string_to_array($%d, ','), string_to_array($%d, E'\x1e'), string_to_array($%d, E'\x1e')`,
		first, first+1, first+2)
}

// Args are the parameters Columns reads, in its order.
func (r *Rows) Args() []any { return []any{r.UUIDs, r.Payloads, r.Metadata} }

// Prepare readies msgs as Publish would (trace context, correlation id, the
// same checks but one) and starts the publication's span; the caller inserts
// the rows inside its transaction and then calls Done with the insert's
// error. The payload is not parsed here: the outbox's json column parses it
// on insert, and a payload it refuses fails the insert, so the check stays
// before anything is stored (Publish parses it because watermill-sql sends
// it as bytes). Only what the joined form cannot carry is refused here.
func (p *Publisher) Prepare(ctx context.Context, kafkaTopic string, msgs ...*message.Message) (*Rows, error) {
	if err := checkTopic(kafkaTopic); err != nil {
		return nil, err
	}
	span, err := p.start(ctx, kafkaTopic, msgs, checkRowSeparator)
	if err != nil {
		return nil, err
	}
	uuids := make([]string, len(msgs))
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
		uuids[i] = msg.UUID
		payloads.Write(msg.Payload)
		metadata = appendMetadata(metadata, msg.Metadata)
	}
	return &Rows{Table: TableName(kafkaTopic), span: span, publisher: p, topic: kafkaTopic,
		UUIDs: strings.Join(uuids, ","), Payloads: payloads.String(), Metadata: string(metadata)}, nil
}

// Done ends the publication's span, recording err.
func (r *Rows) Done(err error) error {
	defer r.span.End()
	if err != nil {
		return r.publisher.fail(r.span, r.topic, err)
	}
	return nil
}

func (p *Publisher) fail(span trace.Span, topic string, err error) error {
	span.RecordError(err)
	span.SetStatus(codes.Error, "outbox publish failed")
	return fmt.Errorf("outbox: publish to %s: %w", topic, err)
}

func checkMessage(msg *message.Message, checkPayload func(*message.Message) error) error {
	if msg == nil {
		return errors.New("nil message")
	}
	if msg.UUID == "" {
		return errors.New("message without UUID")
	}
	if err := checkPayload(msg); err != nil {
		return err
	}
	for _, key := range []string{kafka.MetaPartitionKey, kafka.MetaEventType, kafka.MetaContractVersion} {
		if msg.Metadata.Get(key) == "" {
			return fmt.Errorf("message %s: metadata %s is required", msg.UUID, key)
		}
	}
	return nil
}

// checkJSONPayload refuses a payload that is not JSON.
func checkJSONPayload(msg *message.Message) error {
	if !json.Valid(msg.Payload) {
		return fmt.Errorf("message %s: payload is not JSON", msg.UUID)
	}
	return nil
}

// checkRowSeparator refuses a message Rows could not carry: a UUID with a
// comma, an empty payload (string_to_array would drop it) or one holding a
// raw RowSeparator (neither is JSON).
func checkRowSeparator(msg *message.Message) error {
	if strings.Contains(msg.UUID, ",") {
		return fmt.Errorf("message %q: a UUID holds no comma", msg.UUID)
	}
	if len(msg.Payload) == 0 {
		return fmt.Errorf("message %s: payload is not JSON (it is empty)", msg.UUID)
	}
	if bytes.Contains(msg.Payload, []byte(RowSeparator)) {
		return fmt.Errorf("message %s: payload is not JSON (it holds a raw record separator)", msg.UUID)
	}
	return nil
}
