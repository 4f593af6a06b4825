package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/testbed"
)

const topic = "kit.test.v1"

// testEvent is the wire form of the test handler's events.
type testEvent struct {
	MessageID uuid.UUID `json:"messageId"`
	Aggregate string    `json:"aggregate"`
	Version   int64     `json:"version"`
	Fail      bool      `json:"fail"`
}

// flakyHandler fails Apply for events marked fail, and records the last
// version it was told about.
type flakyHandler struct{}

func (flakyHandler) Decode(r consumer.Record) (consumer.Event[testEvent], error) {
	var e testEvent
	if err := json.Unmarshal(r.Value, &e); err != nil {
		return consumer.Event[testEvent]{}, err
	}
	return consumer.Event[testEvent]{MessageID: e.MessageID, AggregateID: e.Aggregate, Version: e.Version, OccurredAt: time.Now(), Body: e}, nil
}

func (flakyHandler) Apply(_ context.Context, _ *gorm.DB, events []consumer.Guarded[testEvent]) error {
	for _, e := range events {
		if e.Body.Fail {
			return errors.New("handler refuses")
		}
	}
	return nil
}

// kit is a runner of flakyHandler, not started, on a database and a topic
// of its own, and a producer onto that topic.
type kit struct {
	db      *testbed.Database
	reg     *prometheus.Registry
	runner  *consumer.Runner[testEvent]
	client  *kgo.Client
	brokers []string
}

func newKit(t *testing.T, cfg consumer.Config) kit {
	t.Helper()
	k := kit{db: testbed.NewDatabase(t), reg: prometheus.NewRegistry()}
	brokers := testbed.NewKafka(t, topic)
	cfg.Topic, cfg.Brokers, k.brokers = topic, brokers, brokers
	var err error
	k.runner, err = consumer.NewRunner(k.db.Gorm, cfg, flakyHandler{}, slog.New(slog.DiscardHandler), k.reg)
	require.NoError(t, err)
	k.client, err = kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	t.Cleanup(k.client.Close)
	return k
}

// produce puts e on the topic, keyed by its aggregate.
func (k kit) produce(t *testing.T, e testEvent) {
	t.Helper()
	value, err := json.Marshal(e)
	require.NoError(t, err)
	require.NoError(t, k.client.ProduceSync(context.Background(), &kgo.Record{Key: []byte(e.Aggregate), Value: value}).FirstErr())
}

// TestHandlerThatKeepsFailingIsDeadLetteredAndThePartitionMovesOn: after
// MaxAttempts the record goes to consumer.dead_letters with its error, and
// the next record of the same aggregate (so of the same partition) applies.
func TestHandlerThatKeepsFailingIsDeadLetteredAndThePartitionMovesOn(t *testing.T) {
	t.Parallel()
	k := newKit(t, consumer.Config{Name: "kit-test", MaxAttempts: 3, RetryBackoff: time.Millisecond})
	db, reg := k.db, k.reg
	testbed.StartRunner(t, k.runner)
	k.produce(t, testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 1, Fail: true})
	k.produce(t, testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 2})

	require.Eventually(t, func() bool {
		var v int64
		_ = db.Gorm.Raw(`SELECT version FROM consumer.aggregate_versions WHERE consumer = 'kit-test' AND aggregate_id = 'a'`).Scan(&v)
		return v == 2
	}, testbed.ForwardDeadline, 10*time.Millisecond)

	var dl struct {
		Error    string
		Attempts int
	}
	require.NoError(t, db.Gorm.Raw(`SELECT error, attempts FROM consumer.dead_letters WHERE consumer = 'kit-test'`).Scan(&dl).Error)
	require.Equal(t, "handler refuses", dl.Error)
	require.Equal(t, 3, dl.Attempts)
	require.Equal(t, 1.0, testbed.Metric(t, reg, "pin_consumer_dead_letters_total").GetCounter().GetValue())
	require.Equal(t, 2.0, testbed.Metric(t, reg, "pin_consumer_retries_total").GetCounter().GetValue())
	require.Equal(t, 2.0, testbed.Metric(t, reg, "pin_consumer_consumed_total").GetCounter().GetValue())
}

// recordingHandler is flakyHandler that also notes the last version each
// applied event was given.
type recordingHandler struct {
	flakyHandler
	mu   sync.Mutex
	last map[int64]int64 // version → lastVersion passed to Apply
}

func (h *recordingHandler) Apply(ctx context.Context, tx *gorm.DB, events []consumer.Guarded[testEvent]) error {
	if err := h.flakyHandler.Apply(ctx, tx, events); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.last[e.Version] = e.LastVersion
	}
	return nil
}

// kitBundle is a topic with records already on it and a runner started
// after them, so that the runner finds them fetched together.
type kitBundle struct {
	db      *testbed.Database
	reg     *prometheus.Registry
	handler *recordingHandler
}

func startAfter(t *testing.T, cfg consumer.Config, events ...testEvent) kitBundle {
	t.Helper()
	b := kitBundle{db: testbed.NewDatabase(t), reg: prometheus.NewRegistry(), handler: &recordingHandler{last: map[int64]int64{}}}
	brokers := testbed.NewKafka(t, topic)
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer client.Close()
	records := make([]*kgo.Record, len(events))
	for i, e := range events {
		value, err := json.Marshal(e)
		require.NoError(t, err)
		records[i] = &kgo.Record{Key: []byte(e.Aggregate), Value: value}
	}
	require.NoError(t, client.ProduceSync(context.Background(), records...).FirstErr())

	cfg.Topic, cfg.Brokers = topic, brokers
	r, err := consumer.NewRunner(b.db.Gorm, cfg, b.handler, slog.New(slog.DiscardHandler), b.reg)
	require.NoError(t, err)
	testbed.StartRunner(t, r)
	testbed.Eventually(t, func() error {
		if n := testbed.Metric(t, b.reg, "pin_consumer_consumed_total").GetCounter().GetValue(); n != float64(len(events)) {
			return fmt.Errorf("consumed %v of %d records", n, len(events))
		}
		return nil
	})
	return b
}

// lastGiven is the last version Apply was given with version v.
func (h *recordingHandler) lastGiven(v int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[v]
}

func (b kitBundle) version(t *testing.T, consumerName, aggregate string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, b.db.Gorm.Raw(`SELECT version FROM consumer.aggregate_versions WHERE consumer = ? AND aggregate_id = ?`,
		consumerName, aggregate).Scan(&v).Error)
	return v
}

// TestRecordsFetchedTogetherAreAppliedInOneTransaction: records of one
// partition that are already fetched share a transaction, and inside it the
// inbox and the version guard still see each other: a message repeated in
// the batch is a duplicate, a version below one applied earlier in the batch
// is stale, and each event is given the version applied just before it.
func TestRecordsFetchedTogetherAreAppliedInOneTransaction(t *testing.T) {
	t.Parallel()
	var events []testEvent
	for v := int64(1); v <= 50; v++ {
		events = append(events, testEvent{MessageID: uuid.New(), Aggregate: "a", Version: v})
	}
	events = append(events, events[49], testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 3})
	b := startAfter(t, consumer.Config{Name: "kit-batch"}, events...)

	require.Equal(t, int64(50), b.version(t, "kit-batch", "a"))
	for v := int64(1); v <= 50; v++ {
		require.Equal(t, v-1, b.handler.lastGiven(v), "last version given to Apply for version %d", v)
	}
	require.Equal(t, 1.0, testbed.Metric(t, b.reg, "pin_consumer_duplicates_total").GetCounter().GetValue())
	require.Equal(t, 1.0, testbed.Metric(t, b.reg, "pin_consumer_stale_total").GetCounter().GetValue())
	batches := testbed.Metric(t, b.reg, "pin_consumer_batch_events").GetHistogram()
	require.Equal(t, 52.0, batches.GetSampleSum())
	require.Less(t, batches.GetSampleCount(), uint64(52), "some transaction must carry more than one event")
}

// TestFailingEventInABatchIsDeadLetteredAndTheRestOfTheBatchApplied: the
// batch's transaction rolls back, its events are applied one by one, and
// only the failing one is retried and dead-lettered.
func TestFailingEventInABatchIsDeadLetteredAndTheRestOfTheBatchApplied(t *testing.T) {
	t.Parallel()
	var events []testEvent
	for v := int64(1); v <= 10; v++ {
		events = append(events, testEvent{MessageID: uuid.New(), Aggregate: "b", Version: v, Fail: v == 5})
	}
	b := startAfter(t, consumer.Config{Name: "kit-batch-fail", MaxAttempts: 2, RetryBackoff: time.Millisecond}, events...)

	require.Equal(t, int64(10), b.version(t, "kit-batch-fail", "b"))
	require.Equal(t, int64(4), b.handler.lastGiven(6), "version 5 was never applied")
	var dead []string
	require.NoError(t, b.db.Gorm.Raw(`SELECT value->>'messageId' FROM (SELECT convert_from(value, 'UTF8')::jsonb AS value FROM consumer.dead_letters WHERE consumer = 'kit-batch-fail') d`).Scan(&dead).Error)
	require.Equal(t, []string{events[4].MessageID.String()}, dead)
	require.Equal(t, 1.0, testbed.Metric(t, b.reg, "pin_consumer_dead_letters_total").GetCounter().GetValue())
}

// TestInboxCleanerDeletesOnlyOldEntriesOfItsConsumer.
func TestInboxCleanerDeletesOnlyOldEntriesOfItsConsumer(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	require.NoError(t, db.Gorm.Exec(`
		INSERT INTO consumer.inbox (consumer, message_id, received_at)
		SELECT c, gen_random_uuid(), now() - make_interval(days => d)
		FROM unnest(ARRAY['boost', 'other']) AS c, generate_series(1, 10) AS d`).Error)

	c, err := consumer.NewInboxCleaner(db.Gorm, "boost", 5*24*time.Hour+time.Hour, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	n, err := c.CleanOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(5), n, "days 6 to 10 of boost")

	var left []string
	require.NoError(t, db.Gorm.Raw(`SELECT consumer FROM consumer.inbox ORDER BY consumer`).Scan(&left).Error)
	require.Len(t, left, 15)
	require.Equal(t, "boost", left[0])
	require.Equal(t, "boost", left[4])
	require.Equal(t, "other", left[5])
}
