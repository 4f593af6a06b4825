package outbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestRecordKafkaRefusesInABatchIsDeadLetteredAndTheRestFlows: a poll is
// sent to Kafka as one batch; when the producer refuses one record of it (here
// larger than Producer.MaxMessageBytes), the batch fails, the position stays,
// the poll is forwarded again one message at a time, the refused record is
// dead-lettered after MaxAttempts, every other record arrives (first copies
// in order per key), and the forwarder goes back to batches.
func TestRecordKafkaRefusesInABatchIsDeadLetteredAndTheRestFlows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	reg := prometheus.NewRegistry()

	var before, after []*message.Message
	for i := range 6 {
		before = append(before, event("purchase-"+string(rune('a'+i%3)), i))
	}
	big := event("purchase-big", 1)
	big.Payload = []byte(`{"key":"purchase-big","seq":1,"pad":"` + strings.Repeat("x", 4096) + `"}`)
	// All in one transaction, so they are all in the first poll.
	b.publish(t, append(append([]*message.Message{}, before...), big)...)

	cfg := kafka.ProducerConfig("test")
	cfg.Producer.MaxMessageBytes = 2048
	b.startForwarder(t, outbox.ForwarderConfig{
		Brokers: brokers, Sarama: cfg, MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond,
		ReconnectBackoff: 50 * time.Millisecond,
	}, reg)

	c := newConsumer(t, brokers)
	seen := requireOrderedPerKey(t, untilDistinct(t, c, len(before)))
	waitFor(t, "the refused record to be dead-lettered", func() bool { _, _, dead := b.stats(t); return dead == 1 })
	for _, m := range before {
		require.Contains(t, seen, m.UUID)
	}
	require.NotContains(t, seen, big.UUID)
	var deadID string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT message_id FROM `+outbox.DeadLetterTable).Scan(&deadID))
	require.Equal(t, big.UUID, deadID)

	// Back to batches: later events flow.
	for i := range 5 {
		after = append(after, event("purchase-"+string(rune('a'+i%3)), 100+i))
	}
	b.publish(t, after...)
	seen = requireOrderedPerKey(t, untilDistinct(t, c, len(before)+len(after)))
	for _, m := range after {
		require.Contains(t, seen, m.UUID)
	}
	waitFor(t, "backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })
	require.GreaterOrEqual(t, metricValue(t, reg, "pin_outbox_publish_errors_total"), 3.0,
		"the failed batch and the two one-by-one attempts")
}

// untilDistinct polls until n distinct messages arrived (redeliveries
// aside) and returns every record read so far.
func untilDistinct(tb testing.TB, c *consumer, n int) []*kgo.Record {
	tb.Helper()
	for want := n; ; want++ {
		records := c.until(tb, want)
		ids := map[string]bool{}
		for _, r := range records {
			ids[headers(r)["message_id"]] = true
		}
		if len(ids) >= n {
			return records
		}
		want = len(records)
	}
}
