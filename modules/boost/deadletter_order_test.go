package boost_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/outboxtest"
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
	outboxtest.StartRelay(t, b.db.SQL, outboxtest.Relay{Brokers: b.brokers, Topics: []string{contract.Topic}})
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
	dead := outboxtest.WaitDeadLetters(t, b.db.SQL, contract.Topic, 1)
	require.True(t, strings.HasPrefix(dead[0].Error, outboxtest.ReasonTooLarge+": "), dead[0].Error)
	testbed.SetMaxMessageBytes(t, b.brokers, contract.Topic, "1048588")
	publish(p.envelope(contract.StatusCancelled, 2))
	outboxtest.WaitHeld(t, b.db.SQL, contract.Topic, 1)
	require.Equal(t, 2.0, b.counter(t, "pin_consumer_consumed_total"), "the cancellation waits behind the activation")

	outboxtest.Replay(t, b.db.SQL, dead[0].ID)
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
