package deadletters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/consumer/internal/store"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// These tests keep dead letters with the runner's own insert
// (store.InsertDeadLetter) and hand them back through the commands'
// functions; platform/consumer's tests show how the runner comes to write
// them.

// kitEvent is the wire form of these tests' events; Skip makes the decoder
// decline the record.
type kitEvent struct {
	MessageID uuid.UUID `json:"messageId"`
	Aggregate string    `json:"aggregate"`
	Version   int64     `json:"version"`
	Skip      bool      `json:"skip"`
}

// kitHandler decodes kitEvents and remembers the origin each aggregate was
// last applied with.
type kitHandler struct {
	mu      sync.Mutex
	origins map[string]consumer.Origin
}

func (*kitHandler) Decode(r consumer.Record) (consumer.Event[kitEvent], error) {
	var e kitEvent
	if err := json.Unmarshal(r.Value, &e); err != nil {
		return consumer.Event[kitEvent]{}, err
	}
	if e.Skip {
		return consumer.Event[kitEvent]{}, fmt.Errorf("%w: not for these tests", consumer.ErrSkip)
	}
	return consumer.Event[kitEvent]{MessageID: e.MessageID, AggregateID: e.Aggregate, Version: e.Version, OccurredAt: time.Now(), Body: e}, nil
}

func (h *kitHandler) Apply(_ context.Context, _ *gorm.DB, events []consumer.Guarded[kitEvent]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.origins[e.AggregateID] = e.Origin
	}
	return nil
}

// fixture is a database of its own, the replayer of consumer "kit" and the
// offset of the next dead letter it keeps.
type fixture struct {
	db        *testbed.Database
	handler   *kitHandler
	replayers []consumer.Replayer
	offset    int64
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	h := &kitHandler{origins: map[string]consumer.Origin{}}
	return &fixture{db: testbed.NewDatabase(tb), handler: h,
		replayers: []consumer.Replayer{consumer.NewReplayer[kitEvent]("kit", h, slog.New(slog.DiscardHandler))}}
}

// keep dead-letters a record of consumer "kit" as the runner does and
// returns the dead letter's id; headers are key and value pairs.
func (f *fixture) keep(tb testing.TB, key, value []byte, headers ...[2][]byte) int64 {
	tb.Helper()
	f.offset++
	d := store.DeadLetter{Consumer: "kit", Topic: "kit.v1", Offset: f.offset, Key: key, Value: value,
		Headers: map[string]string{}, HeaderKeys: [][]byte{}, HeaderValues: [][]byte{}, Error: "refused", Attempts: 5}
	for _, h := range headers {
		d.Headers[string(h[0])] = string(h[1])
		d.HeaderKeys, d.HeaderValues = append(d.HeaderKeys, h[0]), append(d.HeaderValues, h[1])
	}
	require.NoError(tb, store.InsertDeadLetter(context.Background(), f.db.SQL, d))
	var id int64
	require.NoError(tb, f.db.SQL.QueryRow(`SELECT id FROM consumer.dead_letters WHERE kafka_offset = $1`, f.offset).Scan(&id))
	return id
}

// keepEvent dead-letters e (version 1 of a new aggregate when e has none)
// and returns the dead letter's id and e's aggregate.
func (f *fixture) keepEvent(tb testing.TB, e kitEvent, headers ...[2][]byte) (int64, string) {
	tb.Helper()
	if e.Aggregate == "" {
		e.Aggregate, e.MessageID, e.Version = uuid.NewString(), uuid.New(), 1
	}
	value, err := json.Marshal(e)
	require.NoError(tb, err)
	return f.keep(tb, []byte(e.Aggregate), value, headers...), e.Aggregate
}

// requireApplied fails tb unless version of aggregate was the last applied.
func (f *fixture) requireApplied(tb testing.TB, aggregate string, version int64) {
	tb.Helper()
	var v int64
	require.NoError(tb, f.db.SQL.QueryRow(`SELECT version FROM consumer.aggregate_versions WHERE consumer = 'kit' AND aggregate_id = $1`,
		aggregate).Scan(&v))
	require.Equal(tb, version, v)
}

func (f *fixture) count(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, f.db.SQL.QueryRow(`SELECT count(*) FROM consumer.dead_letters`).Scan(&n))
	return n
}

// TestListShowsBytesAsTextOrBase64: a key and a value that are not UTF-8
// are listed in base64, a UTF-8 header as text, a null header value as
// neither, and the row is replayable.
func TestListShowsBytesAsTextOrBase64(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key, value := []byte("\xffkey"), []byte("not JSON \xfe")
	f.keep(t, key, value, [2][]byte{[]byte("note"), []byte("é")}, [2][]byte{[]byte("empty"), nil})

	letters, err := List(context.Background(), f.db.SQL, ListFilter{Group: "kit"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	d := letters[0]
	require.Nil(t, d.Key)
	require.Equal(t, base64.StdEncoding.EncodeToString(key), d.KeyBase64)
	require.Nil(t, d.Value)
	require.Equal(t, base64.StdEncoding.EncodeToString(value), d.ValueBase64)
	require.Len(t, d.Headers, 2)
	require.Equal(t, "é", *d.Headers[0].Value)
	require.Nil(t, d.Headers[1].Value)
	require.Empty(t, d.Headers[1].ValueBase64, "a null header value is neither text nor base64")
	require.True(t, d.Replayable)
	others, err := List(context.Background(), f.db.SQL, ListFilter{Group: "another"})
	require.NoError(t, err)
	require.Empty(t, others)
}

// TestReplayOutcomes replays, in one call, a dead letter of a new aggregate
// (applied), one whose aggregate has moved past its version (stale) and one
// the handler now declines (skipped); an undecodable one makes the whole
// replay fail with nothing changed.
func TestReplayOutcomes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	older := kitEvent{Aggregate: uuid.NewString(), MessageID: uuid.New(), Version: 1}
	newer := older
	newer.MessageID, newer.Version = uuid.New(), 2
	newerID, _ := f.keepEvent(t, newer)
	out, err := Replay(ctx, f.db.SQL, f.replayers, []int64{newerID})
	require.NoError(t, err)
	require.Equal(t, "applied", out[0].Outcome)

	fresh, aggregate := f.keepEvent(t, kitEvent{})
	stale, _ := f.keepEvent(t, older)
	skipped, _ := f.keepEvent(t, kitEvent{Skip: true})
	ids := []int64{fresh, stale, skipped}
	broken := f.keep(t, []byte("k"), []byte("not JSON"))

	_, err = Replay(ctx, f.db.SQL, f.replayers, append(ids, broken))
	require.ErrorContains(t, err, "still cannot be decoded")
	require.Equal(t, 4, f.count(t), "nothing changed")

	out, err = Replay(ctx, f.db.SQL, f.replayers, ids)
	require.NoError(t, err)
	outcomes := make([]string, len(out))
	for i, r := range out {
		outcomes[i] = r.Outcome
	}
	require.Equal(t, []string{"applied", "stale", "skipped"}, outcomes)
	f.requireApplied(t, aggregate, 1)
	f.requireApplied(t, older.Aggregate, 2)
	require.Equal(t, 1, f.count(t), "only the undecodable one stays")
	_, err = Replay(ctx, f.db.SQL, f.replayers, ids[:1])
	require.ErrorIs(t, err, ErrNotFound)
}

// TestReplayRefusesMinimalAndOtherConsumersDeadLetters: a minimal dead
// letter has no record to replay, and one of a consumer this process does
// not run cannot be applied by it; either refuses the whole replay.
func TestReplayRefusesMinimalAndOtherConsumersDeadLetters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	good, _ := f.keepEvent(t, kitEvent{})
	require.NoError(t, store.InsertMinimalDeadLetter(ctx, f.db.SQL,
		store.DeadLetter{Consumer: "kit", Topic: "kit.v1", Offset: 1000, Attempts: 1}, "22021"))
	require.NoError(t, store.InsertDeadLetter(ctx, f.db.SQL,
		store.DeadLetter{Consumer: "catalog", Topic: "kit.v1", Offset: 1001, Key: []byte("k"), Value: []byte("{}"),
			HeaderKeys: [][]byte{}, HeaderValues: [][]byte{}, Error: "refused", Attempts: 5}))
	var minimal, other int64
	require.NoError(t, f.db.SQL.QueryRow(`SELECT id FROM consumer.dead_letters WHERE kafka_offset = 1000`).Scan(&minimal))
	require.NoError(t, f.db.SQL.QueryRow(`SELECT id FROM consumer.dead_letters WHERE kafka_offset = 1001`).Scan(&other))

	_, err := Replay(ctx, f.db.SQL, f.replayers, []int64{good, minimal})
	require.ErrorIs(t, err, ErrNotReplayable)
	require.ErrorContains(t, err, "minimal")
	_, err = Replay(ctx, f.db.SQL, f.replayers, []int64{good, other})
	require.ErrorIs(t, err, ErrUnknownGroup)
	require.ErrorContains(t, err, `"catalog"`)
	require.Equal(t, 3, f.count(t), "nothing changed")
	_, _, err = ReplayAll(ctx, f.db.SQL, f.replayers, "catalog")
	require.ErrorIs(t, err, ErrUnknownGroup, "--group names a consumer this process does not run")
}

// TestReplayAllIsNotBlockedByOneThatCannotBeDecoded: a dead letter that can
// never be decoded no longer stops --all: the others are replayed, it is
// reported with its reason and stays, and once discarded with a reason it
// is left out of --all and listed only with Discarded, reason kept.
func TestReplayAllIsNotBlockedByOneThatCannotBeDecoded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	broken := f.keep(t, []byte("k"), []byte("not JSON"))
	goodID, aggregate := f.keepEvent(t, kitEvent{})

	replayed, failed, err := ReplayAll(ctx, f.db.SQL, f.replayers, "")
	require.NoError(t, err)
	require.Len(t, replayed, 1)
	require.Equal(t, goodID, replayed[0].ID)
	f.requireApplied(t, aggregate, 1)
	require.Len(t, failed, 1)
	require.Equal(t, broken, failed[0].ID)
	require.Contains(t, failed[0].Reason, "still cannot be decoded")

	_, err = Discard(ctx, f.db.SQL, []int64{broken}, " ")
	require.Error(t, err, "a reason is required")
	discarded, err := Discard(ctx, f.db.SQL, []int64{broken}, "not JSON: the producer's bug, fixed since")
	require.NoError(t, err)
	require.Len(t, discarded, 1)
	replayed, failed, err = ReplayAll(ctx, f.db.SQL, f.replayers, "kit")
	require.NoError(t, err)
	require.Empty(t, replayed)
	require.Empty(t, failed, "a discarded dead letter is left out")
	_, err = Replay(ctx, f.db.SQL, f.replayers, []int64{broken})
	require.ErrorIs(t, err, ErrNotFound)
	waiting, err := List(ctx, f.db.SQL, ListFilter{Group: "kit"})
	require.NoError(t, err)
	require.Empty(t, waiting)
	kept, err := List(ctx, f.db.SQL, ListFilter{Group: "kit", Discarded: true})
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.Equal(t, "not JSON: the producer's bug, fixed since", kept[0].DiscardReason)
	require.NotNil(t, kept[0].DiscardedAt)
}

// TestReplayReadsTheOriginAsTheRunnerDoes: a replayed snapshot reaches Apply
// as a snapshot, and a dead letter of an unknown origin still cannot be
// replayed.
func TestReplayReadsTheOriginAsTheRunnerDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	snapshot, aggregate := f.keepEvent(t, kitEvent{}, [2][]byte{[]byte(kafka.HeaderEventOrigin), []byte("snapshot")})
	unknown, _ := f.keepEvent(t, kitEvent{}, [2][]byte{[]byte(kafka.HeaderEventOrigin), []byte("backfill")})

	_, err := Replay(ctx, f.db.SQL, f.replayers, []int64{unknown})
	require.ErrorIs(t, err, consumer.ErrUnknownOrigin)
	require.ErrorContains(t, err, "still cannot be decoded")

	out, err := Replay(ctx, f.db.SQL, f.replayers, []int64{snapshot})
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "applied", out[0].Outcome)
	f.handler.mu.Lock()
	defer f.handler.mu.Unlock()
	require.Equal(t, consumer.OriginSnapshot, f.handler.origins[aggregate])
}
