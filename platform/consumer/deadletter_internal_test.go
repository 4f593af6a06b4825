package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/testbed"
)

// These tests hand batches to processBatch, the part of the runner that
// decides what becomes of each record, against real PostgreSQL and without
// a broker: a nil return is what lets the runner mark the batch's offsets.

// kitEvent is the wire form of these tests' events; Skip and Panic make the
// decoder decline the record or panic on it.
type kitEvent struct {
	MessageID uuid.UUID `json:"messageId"`
	Aggregate string    `json:"aggregate"`
	Version   int64     `json:"version"`
	Skip      bool      `json:"skip"`
	Panic     bool      `json:"panic"`
}

type kitHandler struct{}

func (kitHandler) Decode(r Record) (Event[kitEvent], error) {
	var e kitEvent
	if err := json.Unmarshal(r.Value, &e); err != nil {
		return Event[kitEvent]{}, err
	}
	switch {
	case e.Skip:
		return Event[kitEvent]{}, fmt.Errorf("%w: not for these tests", ErrSkip)
	case e.Panic:
		panic("decoder bug")
	}
	return Event[kitEvent]{MessageID: e.MessageID, AggregateID: e.Aggregate, Version: e.Version, OccurredAt: time.Now(), Body: e}, nil
}

func (kitHandler) Apply(context.Context, *gorm.DB, []Guarded[kitEvent]) error { return nil }

// kit is a runner of kitHandler on a database of its own, and the offset
// of the next record it is handed on partition 0.
type kit struct {
	db     *testbed.Database
	runner *Runner[kitEvent]
	reg    *prometheus.Registry
	offset int64
}

func newKit(tb testing.TB) *kit { return newKitOf(tb, kitHandler{}) }

// newKitOf is newKit with another handler of kitEvents.
func newKitOf(tb testing.TB, h Handler[kitEvent]) *kit {
	tb.Helper()
	k := &kit{db: testbed.NewDatabase(tb), reg: prometheus.NewRegistry()}
	var err error
	k.runner, err = NewRunner(k.db.Gorm, Config{Name: "kit", Topic: "kit.v1", Brokers: []string{"127.0.0.1:1"},
		MaxAttempts: 2, RetryBackoff: time.Microsecond}, h, slog.New(slog.DiscardHandler), k.reg)
	require.NoError(tb, err)
	return k
}

// record is the next record of partition 0.
func (k *kit) record(key, value []byte, headers ...*sarama.RecordHeader) *sarama.ConsumerMessage {
	k.offset++
	return &sarama.ConsumerMessage{Topic: "kit.v1", Partition: 0, Offset: k.offset, Key: key, Value: value, Headers: headers}
}

// event is the next record: version 1 of a new aggregate, which it returns.
func (k *kit) event(tb testing.TB, e kitEvent) (*sarama.ConsumerMessage, string) {
	tb.Helper()
	if e.Aggregate == "" {
		e.Aggregate, e.MessageID, e.Version = uuid.NewString(), uuid.New(), 1
	}
	value, err := json.Marshal(e)
	require.NoError(tb, err)
	return k.record([]byte(e.Aggregate), value, &sarama.RecordHeader{Key: []byte("h"), Value: []byte("v")}), e.Aggregate
}

// requireMovesOn hands first and a new event after it to processBatch and
// fails tb unless the batch ends without an error and the event is applied.
func (k *kit) requireMovesOn(tb testing.TB, first *sarama.ConsumerMessage) {
	tb.Helper()
	next, aggregate := k.event(tb, kitEvent{})
	require.NoError(tb, k.runner.processBatch(context.Background(), []*sarama.ConsumerMessage{first, next}))
	k.requireApplied(tb, aggregate)
}

// requireApplied fails tb unless version 1 of aggregate was applied.
func (k *kit) requireApplied(tb testing.TB, aggregate string) {
	tb.Helper()
	var v int64
	require.NoError(tb, k.db.SQL.QueryRow(`SELECT version FROM consumer.aggregate_versions WHERE consumer = 'kit' AND aggregate_id = $1`,
		aggregate).Scan(&v))
	require.Equal(tb, int64(1), v)
}

// storedDeadLetter is a row of consumer.dead_letters, its headers paired.
type storedDeadLetter struct {
	Key, Value, Refused  []byte
	Error                string
	HeaderKeys, HeaderVs [][]byte
	HeadersKept          bool
}

// deadLetter reads the dead letter of the record at offset; ok is false when
// there is none.
func (k *kit) deadLetter(tb testing.TB, offset int64) (dl storedDeadLetter, ok bool) {
	tb.Helper()
	rows, err := k.db.SQL.Query(`
		SELECT d.record_key, d.value, d.error, convert_to(d.refused_sqlstate, 'UTF8'), d.header_keys IS NOT NULL, h.key, h.value, h.key IS NOT NULL
		FROM consumer.dead_letters d
		LEFT JOIN LATERAL unnest(d.header_keys, d.header_values) WITH ORDINALITY AS h(key, value, n) ON true
		WHERE d.consumer = 'kit' AND d.topic = 'kit.v1' AND d.kafka_partition = 0 AND d.kafka_offset = $1 ORDER BY h.n`, offset)
	require.NoError(tb, err)
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var hKey, hValue []byte
		var header bool
		require.NoError(tb, rows.Scan(&dl.Key, &dl.Value, &dl.Error, &dl.Refused, &dl.HeadersKept, &hKey, &hValue, &header))
		ok = true
		if header {
			dl.HeaderKeys, dl.HeaderVs = append(dl.HeaderKeys, hKey), append(dl.HeaderVs, hValue)
		}
	}
	require.NoError(tb, rows.Err())
	return dl, ok
}

// requireKeptWhole fails tb unless the dead letter holds m's bytes.
func requireKeptWhole(tb testing.TB, dl storedDeadLetter, m *sarama.ConsumerMessage) {
	tb.Helper()
	require.Nil(tb, dl.Refused, "a whole dead letter")
	require.True(tb, bytes.Equal(m.Key, dl.Key), "key %q, stored %q", m.Key, dl.Key)
	require.True(tb, bytes.Equal(m.Value, dl.Value), "value %q, stored %q", m.Value, dl.Value)
	require.Len(tb, dl.HeaderKeys, len(m.Headers))
	for i, h := range m.Headers {
		require.True(tb, bytes.Equal(h.Key, dl.HeaderKeys[i]) && bytes.Equal(h.Value, dl.HeaderVs[i]),
			"header %d %q=%q, stored %q=%q", i, h.Key, h.Value, dl.HeaderKeys[i], dl.HeaderVs[i])
	}
}

// FuzzAnyRecordIsAppliedOrDeadLetteredAndTheNextApplied: whatever bytes a
// record's key, value and headers hold, its batch ends without an error (no
// restart), an undecodable record is dead-lettered byte for byte, and the
// record after it is applied.
func FuzzAnyRecordIsAppliedOrDeadLetteredAndTheNextApplied(f *testing.F) {
	f.Add([]byte("k"), []byte("not JSON"), []byte("note"), []byte("a\x00b"))
	f.Add([]byte("\xff"), []byte(`{"aggregate":"\xff\xfe","version":1}`), []byte("\xc3("), []byte{})
	f.Add([]byte{}, []byte(`{"messageId":"5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11","aggregate":"a\u0000b","version":1}`), []byte{0}, []byte{0})
	f.Add([]byte("k"), []byte(`{"skip":true}`), []byte("h"), []byte("v"))
	f.Add([]byte("k"), []byte(`{"panic":true}`), []byte("h"), []byte("\x00"))
	f.Add([]byte("k"), []byte(`{"messageId":"6f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11","aggregate":"a","version":1}`), []byte("h"), []byte("v"))
	f.Add([]byte("k"), []byte(`{"messageId":"7f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11","aggregate":"o","version":1}`), []byte("event_origin"), []byte("backfill"))
	k := newKit(f)

	f.Fuzz(func(t *testing.T, key, value, headerKey, headerValue []byte) {
		poison := k.record(key, value, &sarama.RecordHeader{Key: headerKey, Value: headerValue})
		consumed := testbed.Metric(t, k.reg, "pin_consumer_consumed_total").GetCounter().GetValue()

		k.requireMovesOn(t, poison)
		dl, deadLettered := k.deadLetter(t, poison.Offset)
		if deadLettered {
			requireKeptWhole(t, dl, poison)
		}
		var syntax *json.SyntaxError
		if errors.As(json.Unmarshal(value, new(kitEvent)), &syntax) {
			require.True(t, deadLettered, "an undecodable record is dead-lettered")
		}
		require.Equal(t, consumed+2, testbed.Metric(t, k.reg, "pin_consumer_consumed_total").GetCounter().GetValue(),
			"both records are acknowledged once")
	})
}

// TestSkippedRecordIsCountedNeitherAppliedNorDeadLettered.
func TestSkippedRecordIsCountedNeitherAppliedNorDeadLettered(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	skip, _ := k.event(t, kitEvent{Skip: true, MessageID: uuid.New(), Aggregate: "s", Version: 1})
	k.requireMovesOn(t, skip)
	_, deadLettered := k.deadLetter(t, skip.Offset)
	require.False(t, deadLettered)
	var inbox int64
	require.NoError(t, k.db.SQL.QueryRow(`SELECT count(*) FROM consumer.inbox`).Scan(&inbox))
	require.Equal(t, int64(1), inbox, "only the applied record is in the inbox")
	require.Equal(t, 1.0, testbed.Metric(t, k.reg, "pin_consumer_skipped_total").GetCounter().GetValue())
	require.Equal(t, 2.0, testbed.Metric(t, k.reg, "pin_consumer_consumed_total").GetCounter().GetValue())
}

// TestRecordTheDecoderPanicsOnIsDeadLettered.
func TestRecordTheDecoderPanicsOnIsDeadLettered(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	bad, _ := k.event(t, kitEvent{Panic: true, MessageID: uuid.New(), Aggregate: "p", Version: 1})
	k.requireMovesOn(t, bad)
	dl, ok := k.deadLetter(t, bad.Offset)
	require.True(t, ok)
	requireKeptWhole(t, dl, bad)
	require.Contains(t, dl.Error, "decode panicked: decoder bug")
}

// refuseDeadLetters makes PostgreSQL refuse the dead letters for which cond
// holds with SQLSTATE code, as it would refuse bad data or a missing grant.
func refuseDeadLetters(tb testing.TB, db *testbed.Database, code, cond string) {
	tb.Helper()
	_, err := db.SQL.Exec(fmt.Sprintf(`
		CREATE FUNCTION consumer.refuse_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '%s'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON consumer.dead_letters
			FOR EACH ROW WHEN (%s) EXECUTE FUNCTION consumer.refuse_dead_letter();`, code, cond))
	require.NoError(tb, err)
}

// TestDeadLetterRefusedForItsDataIsKeptMinimal: a class-22 refusal of the
// whole row leaves a dead letter of where the record is and the SQLSTATE,
// and the partition goes on.
func TestDeadLetterRefusedForItsDataIsKeptMinimal(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	refuseDeadLetters(t, k.db, "22P05", "NEW.refused_sqlstate IS NULL")
	poison := k.record([]byte("k"), []byte("not JSON"))
	k.requireMovesOn(t, poison)
	dl, ok := k.deadLetter(t, poison.Offset)
	require.True(t, ok)
	require.Equal(t, "22P05", string(dl.Refused))
	require.Nil(t, dl.Key)
	require.Nil(t, dl.Value)
	require.False(t, dl.HeadersKept)
	require.Contains(t, dl.Error, "SQLSTATE 22P05")
	require.Equal(t, 1.0, testbed.Metric(t, k.reg, "pin_consumer_dead_letters_total").GetCounter().GetValue())
}

// TestDeadLetterTheDatabaseRefusesStopsTheBatch: a refusal that is not the
// data's (here a missing privilege) is a database fault: the batch ends with
// it, unmarked, and once the fault is gone the same batch goes through.
func TestDeadLetterTheDatabaseRefusesStopsTheBatch(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	refuseDeadLetters(t, k.db, "42501", "true")
	poison := k.record([]byte("k"), []byte("not JSON"))
	next, aggregate := k.event(t, kitEvent{})
	batch := []*sarama.ConsumerMessage{poison, next}

	err := k.runner.processBatch(context.Background(), batch)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42501", pgErr.Code)
	_, ok := k.deadLetter(t, poison.Offset)
	require.False(t, ok)
	var versions int64
	require.NoError(t, k.db.SQL.QueryRow(`SELECT count(*) FROM consumer.aggregate_versions`).Scan(&versions))
	require.Zero(t, versions, "nothing after the record is applied either")

	_, err = k.db.SQL.Exec(`DROP TRIGGER refuse ON consumer.dead_letters`)
	require.NoError(t, err)
	require.NoError(t, k.runner.processBatch(context.Background(), batch))
	k.requireApplied(t, aggregate)
	dl, ok := k.deadLetter(t, poison.Offset)
	require.True(t, ok)
	requireKeptWhole(t, dl, poison)
}

// TestEventTheGuardCannotHoldIsDeadLetteredWithTheRule: versions 0 and -3,
// a nil message id and an empty aggregate id were counted as stale or
// guarded under a key that means nothing; each is dead-lettered with the
// rule it broke, and the partition goes on.
func TestEventTheGuardCannotHoldIsDeadLetteredWithTheRule(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		e    kitEvent
		rule string
	}{
		"version 0":       {kitEvent{MessageID: uuid.New(), Aggregate: "v0", Version: 0}, "the version must be at least 1, is 0"},
		"version -3":      {kitEvent{MessageID: uuid.New(), Aggregate: "v-3", Version: -3}, "the version must be at least 1, is -3"},
		"nil message id":  {kitEvent{Aggregate: "nil", Version: 1}, "the message id must not be the nil UUID"},
		"no aggregate id": {kitEvent{MessageID: uuid.New(), Version: 1}, "the aggregate id must not be empty"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			value, err := json.Marshal(tc.e) // not k.event, which fills in an empty aggregate
			require.NoError(t, err)
			bad := k.record([]byte("key"), value)
			k.requireMovesOn(t, bad)
			dl, ok := k.deadLetter(t, bad.Offset)
			require.True(t, ok, "dead-lettered")
			require.Contains(t, dl.Error, tc.rule)
			require.Zero(t, testbed.Metric(t, k.reg, "pin_consumer_stale_total").GetCounter().GetValue(), "not stale")
		})
	}
}
