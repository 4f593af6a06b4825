package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

func TestRelayEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := outbox.NewPublisher(tp)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers}, reg)

	purchaseID := uuid.NewString()
	msg := event(purchaseID, 1)
	msg.Metadata.Set(kafka.MetaCorrelationID, "run-7")
	msg.Metadata.Set("internal_note", "stays in the outbox")
	ctx, span := tp.Tracer("test").Start(b.ctx, "expire cycle")
	require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(ctx, pub, tx, topic, msg)
	}))
	span.End()

	c := newConsumer(t, brokers)
	rec := c.until(t, 1)[0]
	require.Equal(t, topic, rec.Topic)
	require.Equal(t, purchaseID, string(rec.Key))
	require.Equal(t, string(msg.Payload), string(rec.Value))
	require.Equal(t, map[string]string{
		"message_id":       msg.UUID,
		"event_type":       "pin.promotion.purchase-changed",
		"contract_version": "1",
		"correlation_id":   "run-7",
		"traceparent":      msg.Metadata.Get(kafka.MetaTraceparent),
	}, headers(rec))
	require.Len(t, rec.Headers, 5, "no other headers")
	require.Contains(t, headers(rec)["traceparent"], span.SpanContext().TraceID().String())

	// Kafka's default partitioner decides the partition from the key.
	want := kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: rec.Key}, testbed.KafkaPartitions)
	require.Equal(t, int32(want), rec.Partition)

	waitFor(t, "backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })
	require.Equal(t, 1.0, metricValue(t, reg, "pin_outbox_published_total"))
	c.quiet(t, 300*time.Millisecond)
}

func TestRelayKeepsOrderPerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	b.startRelay(t, relay.Config{Brokers: brokers, BatchSize: 7}, nil)

	const keys, perKey = 12, 25
	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("purchase-%02d", k)
			for seq := 1; seq <= perKey; seq++ {
				if !assert.NoError(t, b.tryPublish(event(key, seq))) { // one transaction per event, writers racing
					return
				}
			}
		}()
	}
	wg.Wait()

	records := newConsumer(t, brokers).until(t, keys*perKey)
	seen := requireOrderedPerKey(t, records)
	require.Len(t, seen, keys*perKey)
	for id, n := range seen {
		require.Equal(t, 1, n, "message %s forwarded twice without any failure", id)
	}
}

func TestRelayWaitsForBrokerAndResumesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	port := testbed.FreePort(t)
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	reg := prometheus.NewRegistry()
	b.startRelay(t, relay.Config{
		Brokers: brokers, ReconnectBackoff: 50 * time.Millisecond, MaxReconnectBackoff: 300 * time.Millisecond,
	}, reg)

	// No broker: publishing is just a database insert and never waits.
	for seq := 1; seq <= 20; seq++ {
		start := time.Now()
		b.publish(t, event("purchase-a", seq), event("purchase-b", seq))
		require.Less(t, time.Since(start), 2*time.Second)
	}
	// The relay has tried and failed, and acknowledged nothing meanwhile.
	waitFor(t, "the relay to fail on the absent broker", func() bool {
		return metricValue(t, reg, "pin_outbox_publish_errors_total") >= 2
	})
	backlog, _, _ := b.stats(t)
	require.EqualValues(t, 40, backlog, "nothing is acknowledged while the broker is down")

	// The broker comes up: everything goes out, in order.
	cluster := startKfakeOn(t, port)
	records := newConsumer(t, brokers).until(t, 40)
	seen := requireOrderedPerKey(t, records)
	require.Len(t, seen, 40)
	waitFor(t, "backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })

	// It goes away again (all its data with it) and comes back on the same
	// port: what was published meanwhile is delivered after the restart.
	cluster.Close()
	for seq := 21; seq <= 30; seq++ {
		b.publish(t, event("purchase-a", seq))
	}
	failed := metricValue(t, reg, "pin_outbox_publish_errors_total")
	waitFor(t, "the relay to fail on the closed broker", func() bool {
		return metricValue(t, reg, "pin_outbox_publish_errors_total") > failed
	})
	startKfakeOn(t, port)
	records = newConsumer(t, brokers).until(t, 10)
	seen = requireOrderedPerKey(t, records)
	require.Len(t, seen, 10)
	_, first := seqOf(t, records[0])
	require.Equal(t, 21, first)
}

func startKfakeOn(tb testing.TB, port int) *kfake.Cluster {
	tb.Helper()
	var c *kfake.Cluster
	// The port was just released; retry in case it lingers.
	testbed.Eventually(tb, func() (err error) {
		c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(testbed.KafkaPartitions, topic))
		return err
	})
	tb.Cleanup(c.Close)
	return c
}

func TestPoisonMessageIsDeadLetteredAndTheNextOneFlows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	reg := prometheus.NewRegistry()

	good1 := event("purchase-1", 1)
	b.publish(t, good1)
	// A message without a partition key gets past no Publisher; write it as
	// an older release or a manual insert could have.
	poison := event("purchase-1", 2)
	poison.Metadata.Set(kafka.MetaPartitionKey, "")
	insertRaw(t, b, poison.UUID, string(poison.Payload), `{"partition_key":""}`)
	// And a row whose metadata is no message metadata at all.
	badMeta := uuid.NewString()
	insertRaw(t, b, badMeta, `{"foo":1}`, `{"partition_key":7}`)
	good2 := event("purchase-1", 3)
	b.publish(t, good2)

	b.startRelay(t, relay.Config{Brokers: brokers}, reg)

	records := newConsumer(t, brokers).until(t, 2)
	require.Equal(t, good1.UUID, headers(records[0])["message_id"])
	require.Equal(t, good2.UUID, headers(records[1])["message_id"])

	waitFor(t, "backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })
	_, _, dead := b.stats(t)
	require.EqualValues(t, 2, dead)

	rows, err := b.db.SQL.Query(`SELECT COALESCE(message_id, ''), error, attempts, outbox_offset > 0
		FROM `+outbox.DeadLetterTable+` WHERE topic = $1 ORDER BY id`, topic)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, msg string
		var attempts int
		var hasOffset bool
		require.NoError(t, rows.Scan(&id, &msg, &attempts, &hasOffset))
		require.True(t, hasOffset)
		got = append(got, fmt.Sprintf("%s | %d | %s", id, attempts, msg))
	}
	require.Len(t, got, 2)
	require.Contains(t, got[0], poison.UUID+" | 1 | invalid: ")
	require.Contains(t, got[0], "partition_key")
	require.Contains(t, got[1], badMeta+" | 1 | invalid: metadata")
	require.Equal(t, 1.0, metricValue(t, reg, "pin_outbox_publish_errors_total"),
		"only the poison message reached the producer, once: no retry makes a key appear")
	require.Equal(t, 2.0, metricValue(t, reg, "pin_outbox_published_total"))
}

// insertRaw writes an outbox row without the Publisher's checks, as an older
// release or a manual insert could have.
func insertRaw(tb testing.TB, b testBundle, id, payload, metadata string) {
	tb.Helper()
	_, err := b.db.SQL.Exec(`INSERT INTO outbox.messages (topic, uuid, payload, metadata) VALUES ($1, $2, $3, $4)`,
		topic, id, payload, metadata)
	require.NoError(tb, err)
}

// metricValue sums the series of one metric family in reg (0 when absent).
func metricValue(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	var v float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

// TestRelayServesSeveralTopics: each topic's records reach its own Kafka
// topic, in the order they were committed, when the topics' rows
// interleave in the one offset sequence. Each topic's relay session keeps
// one plan for its read over every topic's table (the topic is pruned when
// the read runs), so a read that returned another topic's rows, or this
// topic's out of order, would show here.
func TestRelayServesSeveralTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "pin.test.other-topic.v1"
	// A second topic's table, made the way `pin migrate up` makes it.
	require.NoError(t, outbox.EnsureTopics(b.ctx, b.db.SQL, other))

	brokers := testbed.NewKafka(t, topic, other)
	b.startRelay(t, relay.Config{Brokers: brokers, Topics: []string{topic, other}}, nil)
	const perTopic = 20
	for seq := 1; seq <= perTopic; seq++ {
		require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			if err := publish(b.ctx, b.pub, tx, topic, event("p", seq)); err != nil {
				return err
			}
			return publish(b.ctx, b.pub, tx, other, event("p", seq))
		}))
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic, other),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	got := map[string][]int{}
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	for len(got[topic])+len(got[other]) < 2*perTopic && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			_, seq := seqOf(t, r)
			got[r.Topic] = append(got[r.Topic], seq)
		})
	}
	want := make([]int, perTopic)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, map[string][]int{topic: want, other: want}, got)
}

// A stop asked for while the outbox holds a backlog ends the relay after
// the round in flight: the backlog is the next active relay's, and what this
// one sent is acknowledged.
func TestStopWithABacklogEndsAfterTheRoundInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	const total, batch = 10_000, 10
	msgs := make([]*message.Message, total)
	for i := range msgs {
		msgs[i] = event(uuid.NewString(), 1)
	}
	b.publish(t, msgs...)
	stop := b.startRelay(t, relay.Config{Brokers: brokers, BatchSize: batch}, nil)
	waitFor(t, "the first round to be acknowledged", func() bool { n, _, _ := b.stats(t); return n < total })
	stop()

	backlog, _, _ := b.stats(t)
	require.Positive(t, backlog, "the relay drained the whole backlog after it was asked to stop")
	acked := total - int(backlog)
	t.Logf("acknowledged %d of %d rows before stopping", acked, total)
	newConsumer(t, brokers).untilDistinct(t, acked) // nothing acknowledged is missing from Kafka
}
