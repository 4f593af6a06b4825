package outbox_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/deadletter"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/deadletters"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestReplayedDeadLetterReachesKafkaWithItsMessageID has the relay
// dead-letter an event Kafka refuses (larger than the producer allows), then
// lifts the limit as an operator would fix the broker, and replays it: the
// same message id, key, value and headers reach the topic, and a second
// replay of the same id changes nothing.
func TestReplayedDeadLetterReachesKafkaWithItsMessageID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	small := kafka.ProducerConfig("pin-outbox-relay-small")
	small.Producer.MaxMessageBytes = 64
	stop := b.startRelay(t, relay.Config{Brokers: brokers, Sarama: small}, nil)

	original := event("purchase-7", 1)
	original.Payload = []byte(`{"seq":1,"padding":"` + strings.Repeat("x", 200) + `"}`)
	original.Metadata.Set(kafka.MetaCorrelationID, "req-dead")
	b.publish(t, original)
	waitFor(t, "the event to be dead-lettered", func() bool { n, _, dead := b.stats(t); return n == 0 && dead == 1 })
	stop()

	listed, err := deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{Topic: topic})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	d := listed[0]
	require.Equal(t, original.UUID, d.MessageID)
	require.Equal(t, topic, d.Topic)
	require.Equal(t, 1, d.Attempts, "dead-lettered at once: no retry makes it smaller")
	require.True(t, strings.HasPrefix(d.Error, "too_large: "), d.Error)
	require.JSONEq(t, string(original.Payload), string(d.Payload))
	require.Contains(t, string(d.Metadata), `"partition_key":"purchase-7"`)
	other, err := deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{Topic: "another.topic"})
	require.NoError(t, err)
	require.Empty(t, other, "--topic filters")

	replayed, err := deadletters.Replay(b.ctx, b.db.SQL, []int64{d.ID})
	require.NoError(t, err)
	require.Len(t, replayed, 1)
	require.Equal(t, deadletters.Replayed{Ref: deadletter.Ref{ID: d.ID, Topic: topic, MessageID: original.UUID}, NewOutboxOffset: replayed[0].NewOutboxOffset}, replayed[0])
	require.Equal(t, d.OutboxOffset, replayed[0].NewOutboxOffset, "back at its own offset, before any record of its key that waited")
	backlog, _, dead := b.stats(t)
	require.EqualValues(t, 1, backlog, "back in the relay's queue")
	require.EqualValues(t, 0, dead, "gone from the dead letters in the same transaction")

	_, err = deadletters.Replay(b.ctx, b.db.SQL, []int64{d.ID})
	require.ErrorIs(t, err, deadletters.ErrNotFound, "a second replay of the same id")
	backlog, _, _ = b.stats(t)
	require.EqualValues(t, 1, backlog, "the second replay queued nothing")

	b.startRelay(t, relay.Config{Brokers: brokers}, nil)
	rec := newConsumer(t, brokers).until(t, 1)[0]
	require.Equal(t, "purchase-7", string(rec.Key))
	require.Equal(t, string(original.Payload), string(rec.Value))
	require.Equal(t, map[string]string{
		"message_id":       original.UUID,
		"event_type":       "pin.promotion.purchase-changed",
		"contract_version": "1",
		"correlation_id":   "req-dead",
	}, headers(rec), "the headers it was first meant to carry (no trace is active here)")
}

// TestReplayIsAllOrNothingAndAllSkipsWhatCannotBeSent names a missing id, a
// row without a key and good rows: a replay naming a bad one changes
// nothing, --all replays the good ones in their order and reports and keeps
// the other, and a second --all finds only that one; discarded, it is
// replayed by nothing and listed only with --discarded, with its reason.
func TestReplayIsAllOrNothingAndAllSkipsWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := insertDeadLetter(t, b, "m-1", `{"partition_key":"p-1"}`)
	keyless := insertDeadLetter(t, b, "m-2", `{"partition_key":""}`)
	third := insertDeadLetter(t, b, "m-3", `{"partition_key":"p-1"}`)

	_, err := deadletters.Replay(b.ctx, b.db.SQL, []int64{first, 999999})
	require.ErrorIs(t, err, deadletters.ErrNotFound)
	require.Contains(t, err.Error(), "999999")
	_, err = deadletters.Replay(b.ctx, b.db.SQL, []int64{first, keyless})
	require.ErrorIs(t, err, deadletters.ErrNotReplayable)
	backlog, _, dead := b.stats(t)
	require.EqualValues(t, 0, backlog, "nothing queued")
	require.EqualValues(t, 3, dead, "nothing removed")

	replayed, failed, err := deadletters.ReplayAll(b.ctx, b.db.SQL, topic)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, keyless, failed[0].ID)
	require.Equal(t, "m-2", failed[0].MessageID)
	require.Contains(t, failed[0].Reason, "partition_key")
	require.Len(t, replayed, 2)
	require.Equal(t, []int64{first, third}, []int64{replayed[0].ID, replayed[1].ID})
	require.Less(t, replayed[0].NewOutboxOffset, replayed[1].NewOutboxOffset, "in the order they were dead-lettered")
	left, err := deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, keyless, left[0].ID)

	again, failed, err := deadletters.ReplayAll(b.ctx, b.db.SQL, "")
	require.NoError(t, err)
	require.Empty(t, again, "a second --all has nothing to replay")
	require.Len(t, failed, 1, "but reports the one it cannot")

	_, err = deadletters.Discard(b.ctx, b.db.SQL, []int64{keyless, first}, "no key")
	require.ErrorIs(t, err, deadletters.ErrNotFound, "first was replayed: all or nothing")
	discarded, err := deadletters.Discard(b.ctx, b.db.SQL, []int64{keyless}, "no key: the event was never meant to go")
	require.NoError(t, err)
	require.Len(t, discarded, 1)
	require.Equal(t, "no key: the event was never meant to go", discarded[0].DiscardReason)
	require.NotNil(t, discarded[0].DiscardedAt)
	_, err = deadletters.Discard(b.ctx, b.db.SQL, []int64{keyless}, "again")
	require.ErrorIs(t, err, deadletters.ErrNotFound, "discarded once")
	_, err = deadletters.Replay(b.ctx, b.db.SQL, []int64{keyless})
	require.ErrorIs(t, err, deadletters.ErrNotFound, "a discarded one is not replayed")
	again, failed, err = deadletters.ReplayAll(b.ctx, b.db.SQL, "")
	require.NoError(t, err)
	require.Empty(t, again)
	require.Empty(t, failed, "--all leaves discarded ones alone")
	_, _, dead = b.stats(t)
	require.EqualValues(t, 0, dead, "the gauge counts waiting dead letters only")
	left, err = deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{})
	require.NoError(t, err)
	require.Empty(t, left)
	kept, err := deadletters.List(b.ctx, b.db.SQL, deadletters.ListFilter{Discarded: true})
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.Equal(t, keyless, kept[0].ID)
	require.Equal(t, "no key: the event was never meant to go", kept[0].DiscardReason)
	queued := b.strings(t, `SELECT uuid FROM outbox.messages WHERE topic = $1 AND NOT acked ORDER BY "offset"`, topic)
	require.Equal(t, []string{"m-1", "m-3"}, queued, "each replayed once, with its message id")
}

// TestConcurrentReplaysOfOneDeadLetterQueueItOnce runs two replays of the
// same id at once: one moves it, the other finds it gone.
func TestConcurrentReplaysOfOneDeadLetterQueueItOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := insertDeadLetter(t, b, "m-1", `{"partition_key":"p-1"}`)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = deadletters.Replay(b.ctx, b.db.SQL, []int64{id}) })
	}
	wg.Wait()
	succeeded := 0
	for _, err := range errs {
		if err == nil {
			succeeded++
		} else {
			require.ErrorIs(t, err, deadletters.ErrNotFound)
		}
	}
	require.Equal(t, 1, succeeded)
	backlog, _, dead := b.stats(t)
	require.EqualValues(t, 1, backlog)
	require.EqualValues(t, 0, dead)
}

// insertDeadLetter writes a dead letter of topic as the relay does (of a
// row whose offset the outbox's sequence gave, since deleted), and returns
// its id.
func insertDeadLetter(tb testing.TB, b testBundle, messageID, metadata string) int64 {
	tb.Helper()
	var id int64
	require.NoError(tb, b.db.SQL.QueryRow(`INSERT INTO `+outbox.DeadLetterTable+`
		(topic, message_id, outbox_offset, payload, metadata, error, attempts)
		VALUES ($1, $2, nextval('outbox.messages_offset_seq'), '{"seq":1}', $3, 'kafka: refused', 5) RETURNING id`,
		topic, messageID, metadata).Scan(&id))
	return id
}

// TestReplayOfADeadLetterWhoseOffsetIsAnothersTakesANewOne: a dead letter
// from before the outbox of migration 00003 names an offset another
// message now has. Its replay leaves that row alone and takes a new offset
// at the end, as every replay did before a dead letter held its key.
func TestReplayOfADeadLetterWhoseOffsetIsAnothersTakesANewOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish(t, event("other", 1))
	var offset int64
	require.NoError(t, b.db.SQL.QueryRow(`UPDATE outbox.messages SET acked = true WHERE topic = $1 RETURNING "offset"`, topic).Scan(&offset))
	var id int64
	require.NoError(t, b.db.SQL.QueryRow(`INSERT INTO `+outbox.DeadLetterTable+`
		(topic, message_id, outbox_offset, payload, metadata, error, attempts)
		VALUES ($1, 'legacy-1', $2, '{"seq":1}', '{"partition_key":"p-1"}', 'kafka: refused', 5) RETURNING id`, topic, offset).Scan(&id))

	replayed, err := deadletters.Replay(b.ctx, b.db.SQL, []int64{id})
	require.NoError(t, err)
	require.Greater(t, replayed[0].NewOutboxOffset, offset, "a new row at the end")
	var acked bool
	var uuid string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT acked, uuid FROM outbox.messages WHERE topic = $1 AND "offset" = $2`, topic, offset).Scan(&acked, &uuid))
	require.True(t, acked, "the other message's row is left as it was")
	require.NotEqual(t, "legacy-1", uuid)
	backlog, _, dead := b.stats(t)
	require.EqualValues(t, 1, backlog)
	require.Zero(t, dead)
}
