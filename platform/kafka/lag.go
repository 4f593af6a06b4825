package kafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Backlog is what a consumer group has still to take of a topic.
type Backlog struct {
	// Lag is the records not committed yet, summed over the partitions:
	// each partition's end offset less the group's committed offset (less
	// its start, where the group has committed nothing).
	Lag int64
	// OldestWaitingAt is the timestamp of the oldest record waiting, the
	// earliest over the partitions of the first record after the committed
	// offset; nil when nothing waits.
	OldestWaitingAt *time.Time
}

// GroupBacklog asks the broker for the backlog of group on topic, for `pin
// status`: with the oldest waiting record's time, which says whether the
// group is taking what arrives (ADR 0020).
func GroupBacklog(brokers []string, sec Security, group, topic string) (Backlog, error) {
	client, err := sarama.NewClient(brokers, statusConfig(sec))
	if err != nil {
		return Backlog{}, fmt.Errorf("kafka: connect: %w", err)
	}
	defer func() { _ = client.Close() }()
	waiting, err := groupWaiting(client, group, topic)
	if err != nil {
		return Backlog{}, err
	}
	var b Backlog
	for p, w := range waiting {
		b.Lag += w.end - w.from
		at, err := recordTime(client, topic, p, w.from)
		if err != nil {
			return Backlog{}, err
		}
		if b.OldestWaitingAt == nil || at.Before(*b.OldestWaitingAt) {
			b.OldestWaitingAt = &at
		}
	}
	return b, nil
}

// statusConfig is the client of GroupBacklog: an operator waits for its
// answer, so every wait on the network is short and nothing is asked
// twice. A broker that takes the connection and never answers (a frozen
// process) makes `pin status` say "lag unknown" after a few seconds; with
// the admin defaults (10 s a request, metadata retried) it took a minute.
func statusConfig(sec Security) *sarama.Config {
	cfg := AdminConfig("pin-status", sec)
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Net.ReadTimeout = 3 * time.Second
	cfg.Net.WriteTimeout = 3 * time.Second
	cfg.Metadata.Retry.Max = 0
	return cfg
}

// ClientGroupLag is the lag of group on topic (Backlog.Lag) through an open
// client, for a caller that asks again and again (the consumer's lag gauge).
func ClientGroupLag(client sarama.Client, group, topic string) (int64, error) {
	waiting, err := groupWaiting(client, group, topic)
	if err != nil {
		return 0, err
	}
	var lag int64
	for _, w := range waiting {
		lag += w.end - w.from
	}
	return lag, nil
}

// span is the offsets of a partition from the group's next record to the end.
type span struct{ from, end int64 }

// groupWaiting returns, per partition of topic where group has records to
// take, the span of them. A group that never committed (or does not exist
// yet) waits for the whole topic.
func groupWaiting(client sarama.Client, group, topic string) (map[int32]span, error) {
	// The topic's metadata first: it names the controller the admin needs,
	// also for a client that asks for no other topic (Metadata.Full off).
	partitions, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("kafka: connect: %w", err)
	}
	committed, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: partitions})
	if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil, fmt.Errorf("kafka: offsets of group %s: %w", group, err)
	}
	waiting := make(map[int32]span)
	for _, p := range partitions {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("kafka: end of %s/%d: %w", topic, p, err)
		}
		var block *sarama.OffsetFetchResponseBlock
		if committed != nil { // nil: the group does not exist yet
			block = committed.GetBlock(topic, p)
		}
		from := int64(-1)
		if block != nil {
			from = block.Offset
		}
		if from < 0 {
			if from, err = client.GetOffset(topic, p, sarama.OffsetOldest); err != nil {
				return nil, fmt.Errorf("kafka: start of %s/%d: %w", topic, p, err)
			}
		}
		if end > from {
			waiting[p] = span{from, end}
		}
	}
	return waiting, nil
}

// recordTime is the timestamp of the record at offset of topic/partition.
func recordTime(client sarama.Client, topic string, partition int32, offset int64) (time.Time, error) {
	reader, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return time.Time{}, fmt.Errorf("kafka: read %s/%d: %w", topic, partition, err)
	}
	defer func() { _ = reader.Close() }()
	pc, err := reader.ConsumePartition(topic, partition, offset)
	if err != nil {
		return time.Time{}, fmt.Errorf("kafka: read %s/%d@%d: %w", topic, partition, offset, err)
	}
	defer func() { _ = pc.Close() }()
	select {
	case m := <-pc.Messages():
		return m.Timestamp, nil
	case err := <-pc.Errors():
		return time.Time{}, fmt.Errorf("kafka: read %s/%d@%d: %w", topic, partition, offset, err)
	case <-time.After(client.Config().Net.ReadTimeout):
		return time.Time{}, fmt.Errorf("kafka: read %s/%d@%d: no record within %s", topic, partition, offset, client.Config().Net.ReadTimeout)
	}
}
