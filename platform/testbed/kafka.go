package testbed

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaPartitions is the partition count of every topic NewKafka seeds; it
// matches the production topic (3 partitions).
const KafkaPartitions = 3

// NewKafka starts an in-process Kafka-protocol broker (franz-go's kfake) on
// a free 127.0.0.1 port with topics created, each with KafkaPartitions
// partitions, and stops it when tb ends. It returns the bootstrap brokers.
func NewKafka(tb testing.TB, topics ...string) []string {
	tb.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(KafkaPartitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("testbed: start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}
