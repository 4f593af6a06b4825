package kafka

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Record header names. These and nothing else go on the wire
// (docs/contracts: message_id, event_type, contract_version, correlation_id,
// traceparent when a trace is active, event_origin on a snapshot's record).
// A module's contract names them too, for consumers that import no platform;
// its tests hold the two equal.
const (
	HeaderMessageID       = "message_id"
	HeaderEventType       = "event_type"
	HeaderContractVersion = "contract_version"
	HeaderCorrelationID   = "correlation_id"
	HeaderTraceparent     = "traceparent"
	HeaderEventOrigin     = "event_origin"
)

// Metadata keys of an outbox message: partition_key becomes the record's
// key, and each other key becomes the header of the same name.
const (
	MetaPartitionKey    = "partition_key"
	MetaEventType       = HeaderEventType
	MetaContractVersion = HeaderContractVersion
	MetaCorrelationID   = HeaderCorrelationID
	MetaTraceparent     = HeaderTraceparent
	// MetaEventOrigin says why a message was written when that was not a
	// transition: "snapshot" for `pin promotion snapshot`. Absent means a
	// transition.
	MetaEventOrigin = HeaderEventOrigin
)

// ErrNoPartitionKey is returned for a message without the partition_key
// metadata: without a key the per-purchase order would be lost, so such a
// message is never published.
var ErrNoPartitionKey = errors.New("kafka: message has no partition_key metadata")

// ErrNoMessageID is returned for a message with an empty UUID.
var ErrNoMessageID = errors.New("kafka: message has no id")

// Marshaler lays an outbox message out as a Kafka record: key = the
// partition_key metadata, value = the payload untouched, headers =
// message_id (the message UUID) and the event_type, contract_version,
// correlation_id, traceparent and event_origin metadata. Other metadata stays behind;
// empty values are left out (traceparent is absent without a trace).
type Marshaler struct{}

// Marshal implements watermill-kafka's Marshaler.
func (Marshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	if msg.UUID == "" {
		return nil, ErrNoMessageID
	}
	key := msg.Metadata.Get(MetaPartitionKey)
	if key == "" {
		return nil, fmt.Errorf("message %s: %w", msg.UUID, ErrNoPartitionKey)
	}
	headers := make([]sarama.RecordHeader, 0, 6)
	headers = append(headers, sarama.RecordHeader{Key: []byte(HeaderMessageID), Value: []byte(msg.UUID)})
	for _, h := range []struct{ meta, header string }{
		{MetaEventType, HeaderEventType},
		{MetaContractVersion, HeaderContractVersion},
		{MetaCorrelationID, HeaderCorrelationID},
		{MetaTraceparent, HeaderTraceparent},
		{MetaEventOrigin, HeaderEventOrigin},
	} {
		if v := msg.Metadata.Get(h.meta); v != "" {
			headers = append(headers, sarama.RecordHeader{Key: []byte(h.header), Value: []byte(v)})
		}
	}
	return &sarama.ProducerMessage{
		Topic:   topic,
		Key:     sarama.StringEncoder(key),
		Value:   sarama.ByteEncoder(msg.Payload),
		Headers: headers,
	}, nil
}

// RecordBytes is the size the relay's producer gives msg's record
// (sarama.ProducerMessage.ByteSize for record batches, Kafka 0.11 and
// later), which it compares with Producer.MaxMessageBytes: the outbox
// refuses an event above MaxRecordBytes by the same measure.
func RecordBytes(topic string, msg *message.Message) (int, error) {
	pm, err := Marshaler{}.Marshal(topic, msg)
	if err != nil {
		return 0, err
	}
	return pm.ByteSize(2), nil
}
