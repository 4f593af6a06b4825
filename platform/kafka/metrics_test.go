package kafka_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestSaramaCollectsNoMetrics: a producer and a consumer built from the
// package's configurations, while they run, hold only go-metrics' nil
// metrics, which measure nothing (docs/adr/0010-instrumentation.md).
func TestSaramaCollectsNoMetrics(t *testing.T) {
	t.Parallel()
	brokers := testbed.NewKafka(t, "metrics-off")

	producerCfg := kafka.ProducerConfig("metrics-off-test")
	producer, err := sarama.NewSyncProducer(brokers, producerCfg)
	require.NoError(t, err)
	defer func() { _ = producer.Close() }()
	partition, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "metrics-off", Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v")})
	require.NoError(t, err)
	requireNilMetrics(t, "producer", producerCfg.MetricRegistry)

	consumerCfg := kafka.ConsumerConfig("metrics-off-test")
	cons, err := sarama.NewConsumer(brokers, consumerCfg)
	require.NoError(t, err)
	defer func() { _ = cons.Close() }()
	pc, err := cons.ConsumePartition("metrics-off", partition, sarama.OffsetOldest)
	require.NoError(t, err)
	defer func() { _ = pc.Close() }()
	select {
	case <-pc.Messages():
	case <-time.After(testbed.ForwardDeadline):
		t.Fatal("the record sent was not consumed")
	}
	requireNilMetrics(t, "consumer", consumerCfg.MetricRegistry)
}

// requireNilMetrics checks that reg holds metrics, and only nil ones.
func requireNilMetrics(t *testing.T, client string, reg metrics.Registry) {
	t.Helper()
	registered := 0
	reg.Each(func(name string, m any) {
		registered++
		switch m.(type) {
		case metrics.NilMeter, metrics.NilHistogram, metrics.NilCounter:
		default:
			t.Errorf("the %s's %s is a %T: Sarama measures it", client, name, m)
		}
	})
	require.Positive(t, registered, "the %s registered its metrics", client)
}
