package promotion_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/outboxtest"
	"github.com/pinmarket/pin/platform/testbed"
)

// v2Topic is the topic a contract version 2 gets
// (docs/contracts/purchase-changed.md, "A breaking change: version 2").
const v2Topic = "pin.promotion.purchase-changed.v2"

// topicEvent is one event as a consumer of a topic sees it.
type topicEvent struct {
	messageID uuid.UUID
	status    contract.Status
	version   int64
}

// consumeTopics reads topics from the start until each holds want distinct
// events, and returns each topic's events per purchase in the order of first
// arrival (a redelivery, which at least once allows, is dropped).
func consumeTopics(tb testing.TB, brokers []string, want int, topics ...string) map[string]map[uuid.UUID][]topicEvent {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(tb, err)
	defer cl.Close()
	out := map[string]map[uuid.UUID][]topicEvent{}
	seen := map[string]map[uuid.UUID]bool{}
	for _, t := range topics {
		out[t], seen[t] = map[uuid.UUID][]topicEvent{}, map[uuid.UUID]bool{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	done := func() bool {
		for _, t := range topics {
			if len(seen[t]) < want {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("want %d events on each of %v; got %d and %d", want, topics, len(seen[topics[0]]), len(seen[topics[len(topics)-1]]))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			e, err := contract.DecodeRecord(contract.Record{Key: r.Key, Headers: headers, Value: r.Value}, slog.New(slog.DiscardHandler))
			require.NoError(tb, err, "record of %s", r.Topic)
			if seen[r.Topic][e.MessageID] {
				return
			}
			seen[r.Topic][e.MessageID] = true
			out[r.Topic][e.AggregateID] = append(out[r.Topic][e.AggregateID],
				topicEvent{messageID: e.MessageID, status: e.Payload.Status, version: e.Payload.Version})
		})
	}
	return out
}

// TestDualPublishWritesEveryTransitionToBothTopics runs step 4 of the
// version-2 procedure: the module declares a second topic, every transition
// (purchase, cancellation, expiry) is written to both outboxes in its own
// transaction, and the relay brings both to Kafka — every event on both, in
// order per purchase, and a transition the second outbox refuses reaches
// neither.
func TestDualPublishWritesEveryTransitionToBothTopics(t *testing.T) {
	t.Parallel()
	v1 := adapters.PurchaseChangedV1()
	// Version 2 does not exist yet, so its publication builds the v1 event;
	// what runs here is the second topic, the shared transaction and the relay.
	v2 := adapters.Publication{Topic: v2Topic, Message: v1.Message}
	b := newWiredBundle(t, wiring{publications: adapters.Publications{v1, v2}})
	topics := b.module.OutboxTopics()
	require.Equal(t, []string{contract.Topic, v2Topic}, topics, "the host relays what the module declares")

	// The second topic's outbox table, as `pin migrate up` makes it.
	require.NoError(t, outbox.EnsureTopics(context.Background(), b.db.SQL, v2Topic))
	brokers := testbed.NewKafka(t, topics...)
	outboxtest.StartRelay(t, b.db.SQL, outboxtest.Relay{Brokers: brokers, Topics: topics})

	// Purchases bought and half of them cancelled concurrently, the other
	// half expired by one batch of the job.
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	const n = 12
	ids := make([]uuid.UUID, n)
	cancels := make([]response, n)
	parallel(n, func(i int) {
		token := b.tenantToken(t, uuid.New())
		ids[i] = uuid.MustParse(b.buy(t, token, pkg.ID, 1).ID)
		if i%2 == 0 {
			cancels[i] = b.do(t, request{method: http.MethodPost, path: cancelPath(ids[i].String()), token: token, body: map[string]any{"reason": "moved"}})
		}
	})
	for i := 0; i < n; i += 2 {
		require.Equal(t, http.StatusOK, cancels[i].status, string(cancels[i].body))
	}
	var due []uuid.UUID
	for i := 1; i < n; i += 2 {
		due = append(due, ids[i])
	}
	promotiontest.MakeDue(t, b.db, time.Minute, due...)
	expired, err := b.module.ExpireOnce(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, n/2, expired.Expired)

	// A transition whose second write fails leaves nothing behind: not the
	// first topic's row, not the status change. The check refuses new rows
	// of one purchase on the second topic only (NOT VALID: its Active row
	// stays).
	tenant := uuid.New()
	refused := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)
	b.exec(t, fmt.Sprintf(`ALTER TABLE outbox.messages ADD CONSTRAINT refuse_one_purchase
		CHECK (topic <> '%s' OR metadata->>'%s' IS DISTINCT FROM '%s') NOT VALID`, v2Topic, kafka.MetaPartitionKey, refused.ID))
	res := b.do(t, request{method: http.MethodPost, path: cancelPath(refused.ID), token: b.tenantToken(t, tenant), body: map[string]any{"reason": "moved"}})
	require.Equal(t, http.StatusInternalServerError, res.status, string(res.body))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM promotion.promotion_purchases WHERE id = $1 AND status = 'Active' AND version = 1`, refused.ID))
	for _, topic := range topics {
		require.Equal(t, 2*n+1, b.count(t, `SELECT count(*) FROM outbox.messages WHERE topic = $1`, topic), "outbox rows of %s", topic)
	}

	got := consumeTopics(t, brokers, 2*n+1, topics...)
	want := func(id uuid.UUID, last contract.Status) []contract.Status {
		if id == uuid.MustParse(refused.ID) {
			return []contract.Status{contract.StatusActive}
		}
		return []contract.Status{contract.StatusActive, last}
	}
	for i, id := range append(ids, uuid.MustParse(refused.ID)) {
		last := contract.StatusCancelled
		if i%2 == 1 {
			last = contract.StatusExpired
		}
		first := got[contract.Topic][id]
		var statuses []contract.Status
		for j, e := range first {
			statuses = append(statuses, e.status)
			require.Equal(t, int64(j+1), e.version, "purchase %s: events in version order", id)
		}
		require.Equal(t, want(id, last), statuses, "purchase %s on %s", id, contract.Topic)
		require.Equal(t, first, got[v2Topic][id], "purchase %s: the same events, in the same order, on both topics", id)
	}
}
