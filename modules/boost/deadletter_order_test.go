package boost_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestADeadLetteredEventReplayedLateLeavesTheProjectionRight runs the
// outbox relay in front of the boost consumer. A purchase's activation
// (version 1) is dead-lettered; its cancellation (version 2) is not held
// back and is applied; the activation, repaired and replayed as the runbook
// says, then arrives after it and is dropped as stale: the target has no
// boost. A purchase whose events arrive in order, as they would had the key
// been held, ends the same.
func TestADeadLetteredEventReplayedLateLeavesTheProjectionRight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	relay, err := outbox.NewRelay(b.db.SQL, outbox.RelayConfig{Brokers: b.brokers, Topics: []string{contract.Topic}, PollInterval: 20 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	testbed.StartRunner(t, relay)
	pub, err := outbox.NewPublisher(noop.NewTracerProvider())
	require.NoError(t, err)
	publish := func(e contract.Envelope) {
		t.Helper()
		require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
			_, err := pub.Write(ctx, tx, outbox.Write{Events: outbox.Events(contract.Topic, outboxMessage(t, e))})
			return err
		}))
	}

	late, inOrder := project(uuid.New()), project(uuid.New())
	p, q := newPurchase(10, late), newPurchase(10, inOrder)
	activated := p.envelope(contract.StatusActive, 1)
	// Written without its key, as an old release could: the relay
	// dead-letters it and sends the purchase's next event all the same.
	value, err := json.Marshal(activated)
	require.NoError(t, err)
	_, err = b.db.SQL.Exec(`INSERT INTO `+outbox.TableName(contract.Topic)+` (uuid, payload, metadata)
		VALUES ($1, $2, '{"event_type":"pin.promotion.purchase-changed","contract_version":"1"}')`, activated.MessageID.String(), value)
	require.NoError(t, err)
	publish(p.envelope(contract.StatusCancelled, 2))
	publish(q.envelope(contract.StatusActive, 1))
	publish(q.envelope(contract.StatusCancelled, 2))
	b.waitConsumed(t, 3)
	b.requireBoost(t, late, 0, 0)
	b.requireBoost(t, inOrder, 0, 0)
	require.Zero(t, b.counter(t, "pin_consumer_stale_total"))

	dead, err := outbox.ListDeadLetters(ctx, b.db.SQL, outbox.ListFilter{Topic: contract.Topic})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, activated.MessageID.String(), dead[0].MessageID)
	// The runbook's repair (docs/runbooks/outbox-backlog.md), then the replay.
	_, err = b.db.SQL.Exec(`UPDATE outbox.dead_letters
		SET metadata = jsonb_set(COALESCE(metadata::jsonb, '{}'), '{partition_key}', to_jsonb(payload->>'aggregateId'))::json
		WHERE id = $1`, dead[0].ID)
	require.NoError(t, err)
	_, err = outbox.ReplayDeadLetters(ctx, b.db.SQL, []int64{dead[0].ID})
	require.NoError(t, err)

	b.waitConsumed(t, 4)
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_stale_total"), "the replayed activation is older than the cancellation")
	require.True(t, b.logged(t, "stale event skipped", map[string]string{"aggregate_id": p.id.String()}))
	b.requireBoost(t, late, 0, 0)
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
