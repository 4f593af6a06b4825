package kafka_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

func TestPartitionerMatchesKafkaDefault(t *testing.T) {
	t.Parallel()
	const partitions = 3
	ours := kafka.NewPartitioner("t")
	// franz-go's sticky key partitioner with a nil hasher is documented to
	// match Kafka's Java client (murmur2, positive, modulo).
	theirs := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 2000 {
		key := "key-" + strconv.Itoa(i)
		p, err := ours.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, partitions)
		require.NoError(t, err)
		require.Equal(t, theirs.Partition(&kgo.Record{Key: []byte(key)}, partitions), int(p), key)
	}
	require.True(t, ours.RequiresConsistency())
}

func TestMurmur2KnownValues(t *testing.T) {
	t.Parallel()
	// Partition of known keys under Kafka's default partitioner with 3
	// partitions; the hashes are from Kafka's UtilsTest.murmur2.
	for key, hash := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		want := (hash & 0x7fffffff) % 7
		p, err := kafka.NewPartitioner("t").Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, 7)
		require.NoError(t, err)
		require.Equal(t, want, p, key)
	}
}

func TestMarshalerLaysOutTheRecord(t *testing.T) {
	t.Parallel()
	msg := message.NewMessage("5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11", []byte(`{"a":1}`))
	msg.Metadata.Set(kafka.MetaPartitionKey, "purchase-1")
	msg.Metadata.Set(kafka.MetaEventType, "pin.promotion.purchase-changed")
	msg.Metadata.Set(kafka.MetaContractVersion, "1")
	msg.Metadata.Set(kafka.MetaCorrelationID, "req-1")
	msg.Metadata.Set(kafka.MetaTraceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	msg.Metadata.Set("something_else", "never on the wire")

	rec, err := kafka.Marshaler{}.Marshal("topic-a", msg)
	require.NoError(t, err)
	require.Equal(t, "topic-a", rec.Topic)
	key, _ := rec.Key.Encode()
	require.Equal(t, "purchase-1", string(key))
	value, _ := rec.Value.Encode()
	require.Equal(t, `{"a":1}`, string(value))
	headers := map[string]string{}
	for _, h := range rec.Headers {
		headers[string(h.Key)] = string(h.Value)
	}
	require.Equal(t, map[string]string{
		"message_id":       "5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11",
		"event_type":       "pin.promotion.purchase-changed",
		"contract_version": "1",
		"correlation_id":   "req-1",
		"traceparent":      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}, headers)
	require.Len(t, rec.Headers, 5)

	// Without a trace there is no traceparent header at all.
	msg.Metadata.Set(kafka.MetaTraceparent, "")
	rec, err = kafka.Marshaler{}.Marshal("topic-a", msg)
	require.NoError(t, err)
	require.Len(t, rec.Headers, 4)

	// A snapshot's record says so; a transition's carries no such header.
	msg.Metadata.Set(kafka.MetaEventOrigin, "snapshot")
	rec, err = kafka.Marshaler{}.Marshal("topic-a", msg)
	require.NoError(t, err)
	require.Len(t, rec.Headers, 5)
	require.Equal(t, kafka.HeaderEventOrigin, string(rec.Headers[4].Key))
	require.Equal(t, "snapshot", string(rec.Headers[4].Value))
}

func TestMarshalerRefusesMessageWithoutKey(t *testing.T) {
	t.Parallel()
	_, err := kafka.Marshaler{}.Marshal("t", message.NewMessage("id", nil))
	require.ErrorIs(t, err, kafka.ErrNoPartitionKey)
	_, err = kafka.Marshaler{}.Marshal("t", message.NewMessage("", nil))
	require.ErrorIs(t, err, kafka.ErrNoMessageID)
}

func TestProducerConfigIsValid(t *testing.T) {
	t.Parallel()
	c := kafka.ProducerConfig("pin-test")
	require.NoError(t, c.Validate())
	require.True(t, c.Version.IsAtLeast(sarama.V0_11_0_0), "headers need 0.11")
	require.True(t, c.Producer.Idempotent)
	require.Equal(t, sarama.WaitForAll, c.Producer.RequiredAcks)
}

// TestConsumerConfigOutlastsAJoin: the consumer's read timeout exceeds the
// rebalance and session timeouts a join may wait for, and a configuration
// whose read timeout does not (Sarama's defaults with our old 10 s) is
// refused.
func TestConsumerConfigOutlastsAJoin(t *testing.T) {
	t.Parallel()
	c := kafka.ConsumerConfig("pin-test")
	require.NoError(t, c.Validate())
	require.NoError(t, kafka.CheckGroupTimeouts(c))
	require.True(t, c.Version.IsAtLeast(sarama.V2_3_0_0), "KIP-394 and KIP-345 need 2.3")

	old := sarama.NewConfig()
	old.Net.ReadTimeout = 10 * time.Second
	require.ErrorContains(t, kafka.CheckGroupTimeouts(old), "Net.ReadTimeout 10s must exceed Consumer.Group.Rebalance.Timeout 1m0s")
	old.Net.ReadTimeout = old.Consumer.Group.Rebalance.Timeout
	require.Error(t, kafka.CheckGroupTimeouts(old), "equal is not enough: the answer comes after the wait")
}

func TestStartEmbedded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := testbed.FreeAddr(t)

	stop, err := kafka.StartEmbedded(addr, "pin.promotion.purchase-changed.v1")
	require.NoError(t, err)
	t.Cleanup(stop)

	_, err = kafka.StartEmbedded(addr)
	require.Error(t, err, "the address is taken")

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "pin.promotion.purchase-changed.v1")
	require.NoError(t, err)
	require.Len(t, topics["pin.promotion.purchase-changed.v1"].Partitions, kafka.EmbeddedPartitions)

	// The Sarama producer of the outbox relay works against it.
	p, err := sarama.NewSyncProducer([]string{addr}, kafka.ProducerConfig("pin-test"))
	require.NoError(t, err)
	defer p.Close()
	rec, err := kafka.Marshaler{}.Marshal("pin.promotion.purchase-changed.v1", keyed("k1"))
	require.NoError(t, err)
	_, _, err = p.SendMessage(rec)
	require.NoError(t, err)
}

func keyed(key string) *message.Message {
	msg := message.NewMessage("6f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11", []byte(`{}`))
	msg.Metadata.Set(kafka.MetaPartitionKey, key)
	return msg
}

// TestGroupBacklogGivesUpOnASilentBroker: a broker that accepts the
// connection and never answers (a frozen process) makes GroupBacklog fail
// with the network's timeout, which `pin status` shows as "lag unknown",
// instead of waiting for it.
func TestGroupBacklogGivesUpOnASilentBroker(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	held := make(chan net.Conn, 16) // held open, never answered
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held <- conn
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for len(held) > 0 {
			_ = (<-held).Close()
		}
	})
	_, err = kafka.GroupBacklog([]string{ln.Addr().String()}, kafka.Security{}, "boost", "pin.test.v1")
	require.ErrorContains(t, err, "i/o timeout")
}
