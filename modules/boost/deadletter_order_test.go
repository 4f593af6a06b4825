package boost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/deadletters"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestADeadLetteredEventHoldsItsPurchaseSoTheProjectionSeesItInOrder runs
// the outbox relay in front of the boost consumer. The topic's
// max.message.bytes is set below an event, so the broker refuses a
// purchase's activation (version 1) and the relay dead-letters it; the
// limit restored, the purchase's cancellation (version 2), which the broker
// would take, waits behind the dead letter. Replayed as the runbook says,
// the activation is applied, then the cancellation: nothing is stale, the
// target has no boost, as for a purchase delivered in order all along.
func TestADeadLetteredEventHoldsItsPurchaseSoTheProjectionSeesItInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	outboxRelay, err := relay.New(b.db.SQL, relay.Config{Brokers: b.brokers, Topics: []string{contract.Topic}, PollInterval: 20 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	testbed.StartRunner(t, outboxRelay)
	pub, err := outbox.NewPublisher(noop.NewTracerProvider())
	require.NoError(t, err)
	publish := func(e contract.Envelope) {
		t.Helper()
		require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
			return pub.Write(ctx, tx, outbox.Events(contract.Topic, outboxMessage(t, e)))
		}))
	}

	held, inOrder := project(uuid.New()), project(uuid.New())
	p, q := newPurchase(10, held), newPurchase(10, inOrder)
	publish(q.envelope(contract.StatusActive, 1))
	publish(q.envelope(contract.StatusCancelled, 2))
	b.waitConsumed(t, 2)

	testbed.SetMaxMessageBytes(t, b.brokers, contract.Topic, "512")
	publish(p.envelope(contract.StatusActive, 1))
	var dead []deadletters.DeadLetter
	testbed.Eventually(t, func() error {
		dead, err = deadletters.List(ctx, b.db.SQL, deadletters.ListFilter{Topic: contract.Topic})
		if err == nil && len(dead) != 1 {
			err = fmt.Errorf("%d dead letters", len(dead))
		}
		return err
	})
	require.True(t, strings.HasPrefix(dead[0].Error, relay.ReasonTooLarge+": "), dead[0].Error)
	testbed.SetMaxMessageBytes(t, b.brokers, contract.Topic, "1048588")
	publish(p.envelope(contract.StatusCancelled, 2))
	testbed.Eventually(t, func() error {
		s, err := relay.ReadStatus(ctx, b.db.SQL, contract.Topic)
		if err == nil && (s.Held.Records != 1 || s.Backlog != 0) {
			err = fmt.Errorf("%d records held, %d in the backlog", s.Held.Records, s.Backlog)
		}
		return err
	})
	require.Equal(t, 2.0, b.counter(t, "pin_consumer_consumed_total"), "the cancellation waits behind the activation")

	_, err = deadletters.Replay(ctx, b.db.SQL, []int64{dead[0].ID})
	require.NoError(t, err)
	b.waitConsumed(t, 4)
	require.Zero(t, b.counter(t, "pin_consumer_stale_total"), "the activation came first, then the cancellation")
	b.requireBoost(t, held, 0, 0)
	b.requireBoost(t, inOrder, 0, 0)
}

// outboxMessage is e as the promotion module writes it to the outbox.
func outboxMessage(tb testing.TB, e contract.Envelope) *message.Message {
	tb.Helper()
	value, err := json.Marshal(e)
	require.NoError(tb, err)
	msg := message.NewMessage(e.MessageID.String(), value)
	msg.Metadata.Set(kafka.MetaPartitionKey, e.AggregateID.String())
	msg.Metadata.Set(kafka.MetaEventType, contract.EventType)
	msg.Metadata.Set(kafka.MetaContractVersion, "1")
	return msg
}
