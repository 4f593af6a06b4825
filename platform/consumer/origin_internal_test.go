package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// originHandler is kitHandler noting the origin Apply was given per
// aggregate.
type originHandler struct {
	kitHandler
	mu   sync.Mutex
	seen map[string]Origin
}

func (h *originHandler) Apply(_ context.Context, _ *gorm.DB, events []Guarded[kitEvent]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		h.seen[e.AggregateID] = e.Origin
	}
	return nil
}

func (h *originHandler) origin(tb testing.TB, aggregate string) Origin {
	tb.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.seen[aggregate]
	require.True(tb, ok, "aggregate %s was not applied", aggregate)
	return o
}

// originKit is the kit with an originHandler.
func originKit(t *testing.T) (*kit, *originHandler) {
	t.Helper()
	h := &originHandler{seen: map[string]Origin{}}
	return newKitOf(t, h), h
}

// withOrigin is the next record of a new aggregate at version 1, with the
// event_origin header set to value (none when value is nil).
func withOrigin(tb testing.TB, k *kit, value *string) (*sarama.ConsumerMessage, string) {
	tb.Helper()
	e := kitEvent{MessageID: uuid.New(), Aggregate: uuid.NewString(), Version: 1}
	body, err := json.Marshal(e)
	require.NoError(tb, err)
	headers := []*sarama.RecordHeader{{Key: []byte(kafka.HeaderMessageID), Value: []byte(e.MessageID.String())}}
	if value != nil {
		headers = append(headers, &sarama.RecordHeader{Key: []byte(kafka.HeaderEventOrigin), Value: []byte(*value)})
	}
	return k.record([]byte(e.Aggregate), body, headers...), e.Aggregate
}

func ptr(s string) *string { return &s }

// TestHandlerIsGivenTheRecordsOrigin: in one batch, a record without the
// header and one saying "transition" reach Apply as transitions, one saying
// "snapshot" as a snapshot, and one with an origin the kit does not know is
// dead-lettered whole, naming the header, while the rest of the batch is
// applied.
func TestHandlerIsGivenTheRecordsOrigin(t *testing.T) {
	t.Parallel()
	k, h := originKit(t)
	absent, absentID := withOrigin(t, k, nil)
	transition, transitionID := withOrigin(t, k, ptr("transition"))
	snapshot, snapshotID := withOrigin(t, k, ptr("snapshot"))
	unknown, unknownID := withOrigin(t, k, ptr("backfill"))

	require.NoError(t, k.runner.processBatch(context.Background(), []*sarama.ConsumerMessage{absent, transition, unknown, snapshot}))
	require.Equal(t, OriginTransition, h.origin(t, absentID))
	require.Equal(t, OriginTransition, h.origin(t, transitionID))
	require.Equal(t, OriginSnapshot, h.origin(t, snapshotID))

	dl, ok := k.deadLetter(t, unknown.Offset)
	require.True(t, ok, "a record of an unknown origin is dead-lettered")
	requireKeptWhole(t, dl, unknown)
	require.Contains(t, dl.Error, `unknown event origin: event_origin header "backfill"`)
	h.mu.Lock()
	_, applied := h.seen[unknownID]
	h.mu.Unlock()
	require.False(t, applied)
	require.Equal(t, 1.0, testbed.Metric(t, k.reg, "pin_consumer_dead_letters_total").GetCounter().GetValue())
}
