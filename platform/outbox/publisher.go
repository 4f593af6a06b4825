package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/kafka"
)

const instrumentation = "github.com/pinmarket/pin/platform/outbox"

// Publisher writes messages into the outbox inside the caller's transaction
// or statement, so an event is stored if and only if the change it
// describes commits. It is the only way into the outbox tables: its events
// go through the SQL function outbox.publish (write.go).
// It is safe for concurrent use.
type Publisher struct {
	tracer trace.Tracer
}

// NewPublisher returns a Publisher that traces with tp. It logs nothing:
// every failure is returned to the caller.
func NewPublisher(tp trace.TracerProvider) (*Publisher, error) {
	if tp == nil {
		return nil, errors.New("outbox: NewPublisher: nil tracer provider")
	}
	return &Publisher{tracer: tp.Tracer(instrumentation)}, nil
}

// start opens the publication's span and readies msgs for kafkaTopic's
// table: checked, with the traceparent and correlation id in their metadata.
func (p *Publisher) start(ctx context.Context, kafkaTopic string, msgs []*message.Message) (trace.Span, error) {
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
	if runID := correlation.RunID(ctx); runID != "" {
		span.SetAttributes(attribute.String("pin.run_id", runID))
	}

	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	traceparent := carrier.Get(kafka.MetaTraceparent)
	correlationID := correlation.ID(ctx)

	for _, msg := range msgs {
		if err := checkMessage(msg); err != nil {
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
		// Measured with the headers just set, as the relay's producer will.
		if err := checkSize(kafkaTopic, msg); err != nil {
			err = p.fail(span, kafkaTopic, err)
			span.End()
			return span, err
		}
	}
	if len(msgs) == 1 {
		span.SetAttributes(attribute.String("messaging.message.id", msgs[0].UUID))
	}

	return span, nil
}

func (p *Publisher) fail(span trace.Span, topic string, err error) error {
	span.RecordError(err)
	span.SetStatus(codes.Error, "outbox publish failed")
	return fmt.Errorf("outbox: publish to %s: %w", topic, err)
}

// checkMessage refuses a message the outbox cannot carry: one without a
// UUID or the required metadata, or one encode could not join (checkJoinable).
func checkMessage(msg *message.Message) error {
	if msg == nil {
		return errors.New("nil message")
	}
	if msg.UUID == "" {
		return errors.New("message without UUID")
	}
	if err := checkJoinable(msg); err != nil {
		return err
	}
	for _, key := range []string{kafka.MetaPartitionKey, kafka.MetaEventType, kafka.MetaContractVersion} {
		if msg.Metadata.Get(key) == "" {
			return fmt.Errorf("message %s: metadata %s is required", msg.UUID, key)
		}
	}
	return nil
}

// checkJoinable refuses a message encode could not join: a UUID or key
// holding a RowSeparator, an empty payload (string_to_array would drop it)
// or one holding a raw RowSeparator (neither is JSON). The payload is not
// parsed here: outbox.publish casts it to json, and one it refuses fails
// the statement, so nothing is stored.
func checkJoinable(msg *message.Message) error {
	if strings.Contains(msg.UUID, RowSeparator) || strings.Contains(msg.Metadata.Get(kafka.MetaPartitionKey), RowSeparator) {
		return fmt.Errorf("message %q: its UUID and key hold no record separator", msg.UUID)
	}
	if len(msg.Payload) == 0 {
		return fmt.Errorf("message %s: payload is not JSON (it is empty)", msg.UUID)
	}
	if bytes.Contains(msg.Payload, []byte(RowSeparator)) {
		return fmt.Errorf("message %s: payload is not JSON (it holds a raw record separator)", msg.UUID)
	}
	return nil
}
