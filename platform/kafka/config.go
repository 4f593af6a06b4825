// Package kafka holds what the service needs to speak to Kafka: the Sarama
// producer configuration and its security (SASL, TLS), the record layout of
// outbox messages (Marshaler), topic creation and checks, and an embedded
// Kafka-protocol broker for `pin dev` (left out of builds tagged production).
package kafka

import (
	"time"

	"github.com/IBM/sarama"
)

// ProducerConfig returns the Sarama configuration of the outbox relay's
// synchronous producer:
//
//   - Version 2.1: record headers need at least 0.11;
//   - acks from all in-sync replicas and the idempotent producer, so a retry
//     inside Sarama neither loses nor duplicates nor reorders a record;
//   - one request in flight per broker (required by idempotence, and it
//     keeps per-partition order);
//   - Kafka's default partitioner (murmur2 of the key), so a key lands on
//     the partition a Java or librdkafka producer would choose;
//   - short retries and timeouts: a broker that is down is reported to the
//     relay within seconds, which then backs off as a whole instead of
//     holding an outbox transaction open;
//   - records of at most MaxRecordBytes, the limit the outbox enforces when
//     an event is written.
func ProducerConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_1_0_0

	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Timeout = 10 * time.Second
	c.Producer.Partitioner = NewPartitioner
	c.Producer.MaxMessageBytes = MaxRecordBytes

	setNetworkDefaults(c)
	return c
}

// MaxRecordBytes is the largest record the service produces, as Sarama
// sizes it (ProducerMessage.ByteSize: key, value, headers and their worst
// case overhead). It stays below Kafka's default max.message.bytes of a
// topic (1,048,588 bytes), which bounds a record batch with its header, so a
// record the producer takes is one the broker takes (docs/adr/0015).
const MaxRecordBytes = 1_000_000

// NewPartitioner is Kafka's default partitioner for keyed records:
// partition = (murmur2(key) & 0x7fffffff) % partitions, as in the Java
// client. Records without a key go to a random partition.
var NewPartitioner sarama.PartitionerConstructor = sarama.NewCustomPartitioner(
	sarama.WithAbsFirst(),
	sarama.WithCustomHashFunction(newMurmur2),
)
