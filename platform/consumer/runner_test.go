package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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

func (flakyHandler) Apply(_ context.Context, _ *gorm.DB, e consumer.Event[testEvent], _ int64) error {
	if e.Body.Fail {
		return errors.New("handler refuses")
	}
	return nil
}

// TestHandlerThatKeepsFailingIsDeadLetteredAndThePartitionMovesOn: after
// MaxAttempts the record goes to consumer.dead_letters with its error, and
// the next record of the same aggregate (so of the same partition) applies.
func TestHandlerThatKeepsFailingIsDeadLetteredAndThePartitionMovesOn(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, topic)
	reg := prometheus.NewRegistry()
	r, err := consumer.NewRunner(db.Gorm, consumer.Config{
		Name: "kit-test", Topic: topic, Brokers: brokers, MaxAttempts: 3, RetryBackoff: time.Millisecond,
	}, flakyHandler{}, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	testbed.StartRunner(t, r)

	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	produce := func(e testEvent) {
		value, err := json.Marshal(e)
		require.NoError(t, err)
		require.NoError(t, client.ProduceSync(context.Background(), &kgo.Record{Key: []byte(e.Aggregate), Value: value}).FirstErr())
	}
	produce(testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 1, Fail: true})
	produce(testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 2})

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
