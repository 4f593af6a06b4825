package outbox_test

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/outbox/deadletters"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestADeadLetterHoldsItsKeyUntilReplayedOrDiscarded lowers the topic's
// max.message.bytes below a 3 KB event, the first of keys a and d: the
// broker refuses each, the relay dead-letters it, and the keys' later small
// events wait behind it, a new one too, while key b's go by. Status, the
// gauge and the list say which wait behind which. With the limit restored,
// a's dead letter replayed goes first and the ones that waited follow in
// order; d's discarded lets its next one go.
func TestADeadLetterHoldsItsKeyUntilReplayedOrDiscarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	testbed.SetMaxMessageBytes(t, brokers, topic, "2048")
	reg := prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers}, reg)

	b.publish(t, sized(t, "a", 3000), event("a", 2), event("b", 1), sized(t, "d", 3000), event("a", 3), event("d", 2), event("b", 2))
	c := newConsumer(t, brokers)
	c.until(t, 2)
	waitFor(t, "two dead letters", func() bool { _, _, dead := b.stats(t); return dead == 2 })
	b.publish(t, event("a", 4), event("b", 3))
	c.until(t, 3)
	require.Equal(t, map[string][]int{"b": {1, 2, 3}}, seqsByKey(t, c.records), "a and d wait behind their dead letters; b does not")

	// b's last record is on the topic before the relay acknowledges it: the
	// backlog reaches zero once it has, and what waits behind a dead letter
	// waits for an operator, not for the relay, so it never counts there.
	var s relay.TopicStatus
	waitFor(t, "no backlog but the held records", func() bool {
		var err error
		s, err = relay.ReadStatus(b.ctx, b.db.SQL, topic)
		require.NoError(t, err)
		return s.Backlog == 0
	})
	require.EqualValues(t, 2, s.Held.Keys)
	require.EqualValues(t, 4, s.Held.Records, "a's 2, 3 and 4, d's 2")
	require.Equal(t, "a", s.Held.Oldest.Key)
	require.Equal(t, 2.0, metricValue(t, reg, "pin_outbox_held_keys"))
	require.Positive(t, metricValue(t, reg, "pin_outbox_oldest_held_key_age_seconds"))
	listed, err := deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{Topic: topic})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	a, d := listed[0], listed[1]
	require.Equal(t, s.Held.Oldest.DeadLetterID, a.ID)
	require.Equal(t, "a", a.Key)
	require.EqualValues(t, 3, a.WaitingRecords)
	require.Len(t, a.FirstWaiting, 3)
	require.Less(t, a.OutboxOffset, a.FirstWaiting[0].Offset)
	require.EqualValues(t, 1, d.WaitingRecords)

	testbed.SetMaxMessageBytes(t, brokers, topic, "1048588")
	_, err = deadletters.Replay(b.ctx, b.db.SQL, []int64{a.ID})
	require.NoError(t, err)
	c.until(t, 7)
	_, err = deadletters.Discard(b.ctx, b.db.SQL, []int64{d.ID}, "test: d's first event is not wanted")
	require.NoError(t, err)
	c.until(t, 8)
	require.Equal(t, map[string][]int{"a": {1, 2, 3, 4}, "b": {1, 2, 3}, "d": {2}}, seqsByKey(t, c.records))
	waitFor(t, "nothing held", func() bool { return metricValue(t, reg, "pin_outbox_held_keys") == 0 })
}

// seqsByKey is the sequence numbers of records (events or sized ones), per
// key, in the order they are on the topic.
func seqsByKey(tb testing.TB, records []*kgo.Record) map[string][]int {
	tb.Helper()
	out := map[string][]int{}
	for _, r := range records {
		var v struct {
			Key string `json:"key"`
			Seq int    `json:"seq"`
		}
		require.NoError(tb, json.Unmarshal(r.Value, &v), string(r.Value))
		out[v.Key] = append(out[v.Key], v.Seq)
	}
	return out
}
