package consumer

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestListShowsBytesAsTextOrBase64: a key and a value that are not UTF-8
// are listed in base64, a UTF-8 header as text, a null header value as
// neither, and the row is replayable.
func TestListShowsBytesAsTextOrBase64(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	rec := k.record([]byte("\xffkey"), []byte("not JSON \xfe"), &sarama.RecordHeader{Key: []byte("note"), Value: []byte("é")},
		&sarama.RecordHeader{Key: []byte("empty")})
	require.NoError(t, k.runner.processBatch(context.Background(), []*sarama.ConsumerMessage{rec}))

	letters, err := ListDeadLetters(context.Background(), k.db.SQL, ListFilter{Group: "kit"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	d := letters[0]
	require.Nil(t, d.Key)
	require.Equal(t, base64.StdEncoding.EncodeToString(rec.Key), d.KeyBase64)
	require.Nil(t, d.Value)
	require.Equal(t, base64.StdEncoding.EncodeToString(rec.Value), d.ValueBase64)
	require.Len(t, d.Headers, 2)
	require.Equal(t, "é", *d.Headers[0].Value)
	require.Nil(t, d.Headers[1].Value)
	require.Empty(t, d.Headers[1].ValueBase64, "a null header value is neither text nor base64")
	require.True(t, d.Replayable)
	others, err := ListDeadLetters(context.Background(), k.db.SQL, ListFilter{Group: "another"})
	require.NoError(t, err)
	require.Empty(t, others)
}

// TestReplayOutcomes replays, in one call, a dead letter of a new aggregate
// (applied), one whose aggregate has moved past its version (stale) and one
// the handler now declines (skipped); an undecodable one makes the whole
// replay fail with nothing changed.
func TestReplayOutcomes(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	ctx := context.Background()
	replayers := []Replayer{NewReplayer("kit", kitHandler{}, slog.New(slog.DiscardHandler))}
	deadLetter := func(m *sarama.ConsumerMessage) int64 { return deadLetterOf(t, k, m) }
	fresh, aggregate := k.event(t, kitEvent{})
	older := kitEvent{Aggregate: uuid.NewString(), MessageID: uuid.New(), Version: 1}
	newer := older
	newer.MessageID, newer.Version = uuid.New(), 2
	applied, _ := k.event(t, newer)
	require.NoError(t, k.runner.processBatch(ctx, []*sarama.ConsumerMessage{applied}))
	stale, _ := k.event(t, older)
	skipped, _ := k.event(t, kitEvent{Skip: true})
	ids := []int64{deadLetter(fresh), deadLetter(stale), deadLetter(skipped)}
	broken := deadLetter(k.record([]byte("k"), []byte("not JSON")))

	_, err := ReplayDeadLetters(ctx, k.db.Gorm, replayers, append(ids, broken))
	require.ErrorContains(t, err, "still cannot be decoded")
	require.Equal(t, 4, countDeadLetters(t, k), "nothing changed")

	out, err := ReplayDeadLetters(ctx, k.db.Gorm, replayers, ids)
	require.NoError(t, err)
	outcomes := make([]string, len(out))
	for i, r := range out {
		outcomes[i] = r.Outcome
	}
	require.Equal(t, []string{"applied", "stale", "skipped"}, outcomes)
	k.requireApplied(t, aggregate)
	require.Equal(t, 1, countDeadLetters(t, k), "only the undecodable one stays")
	_, err = ReplayDeadLetters(ctx, k.db.Gorm, replayers, ids[:1])
	require.ErrorIs(t, err, ErrDeadLetterNotFound)
}

// TestReplayAllIsNotBlockedByOneThatCannotBeDecoded: a dead letter that can
// never be decoded no longer stops --all: the others are replayed, it is
// reported with its reason and stays, and once discarded with a reason it
// is left out of --all and listed only with Discarded, reason kept.
func TestReplayAllIsNotBlockedByOneThatCannotBeDecoded(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	ctx := context.Background()
	replayers := []Replayer{NewReplayer("kit", kitHandler{}, slog.New(slog.DiscardHandler))}
	deadLetter := func(m *sarama.ConsumerMessage) int64 { return deadLetterOf(t, k, m) }
	broken := deadLetter(k.record([]byte("k"), []byte("not JSON")))
	good, aggregate := k.event(t, kitEvent{})
	goodID := deadLetter(good)

	replayed, failed, err := ReplayAllDeadLetters(ctx, k.db.Gorm, replayers, "")
	require.NoError(t, err)
	require.Len(t, replayed, 1)
	require.Equal(t, goodID, replayed[0].ID)
	k.requireApplied(t, aggregate)
	require.Len(t, failed, 1)
	require.Equal(t, broken, failed[0].ID)
	require.Contains(t, failed[0].Reason, "still cannot be decoded")

	_, err = DiscardDeadLetters(ctx, k.db.SQL, []int64{broken}, " ")
	require.Error(t, err, "a reason is required")
	discarded, err := DiscardDeadLetters(ctx, k.db.SQL, []int64{broken}, "not JSON: the producer's bug, fixed since")
	require.NoError(t, err)
	require.Len(t, discarded, 1)
	replayed, failed, err = ReplayAllDeadLetters(ctx, k.db.Gorm, replayers, "kit")
	require.NoError(t, err)
	require.Empty(t, replayed)
	require.Empty(t, failed, "a discarded dead letter is left out")
	_, err = ReplayDeadLetters(ctx, k.db.Gorm, replayers, []int64{broken})
	require.ErrorIs(t, err, ErrDeadLetterNotFound)
	waiting, err := ListDeadLetters(ctx, k.db.SQL, ListFilter{Group: "kit"})
	require.NoError(t, err)
	require.Empty(t, waiting)
	kept, err := ListDeadLetters(ctx, k.db.SQL, ListFilter{Group: "kit", Discarded: true})
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.Equal(t, "not JSON: the producer's bug, fixed since", kept[0].DiscardReason)
	require.NotNil(t, kept[0].DiscardedAt)
}

// deadLetterOf dead-letters m as the runner does and returns its id.
func deadLetterOf(t *testing.T, k *kit, m *sarama.ConsumerMessage) int64 {
	t.Helper()
	require.NoError(t, k.runner.deadLetter(context.Background(), toRecord(m), errors.New("refused"), 5))
	var id int64
	require.NoError(t, k.db.SQL.QueryRow(`SELECT id FROM consumer.dead_letters WHERE kafka_offset = $1`, m.Offset).Scan(&id))
	return id
}

func countDeadLetters(t *testing.T, k *kit) int {
	t.Helper()
	var n int
	require.NoError(t, k.db.SQL.QueryRow(`SELECT count(*) FROM consumer.dead_letters`).Scan(&n))
	return n
}
