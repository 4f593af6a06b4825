package kafka

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// GroupLag is how many records of topic the consumer group has not
// committed yet, summed over the partitions: each partition's end offset
// less the group's committed offset (less its start, where the group has
// committed nothing).
func GroupLag(brokers []string, sec Security, group, topic string) (int64, error) {
	cfg := AdminConfig("pin-status", sec)
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Metadata.Retry.Max = 1
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return 0, fmt.Errorf("kafka: connect: %w", err)
	}
	defer func() { _ = client.Close() }()
	return ClientGroupLag(client, group, topic)
}

// ClientGroupLag is GroupLag through an open client, for a caller that asks
// again and again (the consumer's lag gauge).
func ClientGroupLag(client sarama.Client, group, topic string) (int64, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return 0, fmt.Errorf("kafka: connect: %w", err)
	}
	partitions, err := client.Partitions(topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: partitions of %s: %w", topic, err)
	}
	committed, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: partitions})
	if err != nil {
		return 0, fmt.Errorf("kafka: offsets of group %s: %w", group, err)
	}
	var lag int64
	for _, p := range partitions {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, fmt.Errorf("kafka: end of %s/%d: %w", topic, p, err)
		}
		from := int64(-1)
		if b := committed.GetBlock(topic, p); b != nil {
			from = b.Offset
		}
		if from < 0 {
			if from, err = client.GetOffset(topic, p, sarama.OffsetOldest); err != nil {
				return 0, fmt.Errorf("kafka: start of %s/%d: %w", topic, p, err)
			}
		}
		lag += max(end-from, 0)
	}
	return lag, nil
}
