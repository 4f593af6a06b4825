package migrations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

const topic = "pin.promotion.purchase-changed.v1"

// oldEnvelope is a row payload of the outbox before 00003: watermill's
// forwarder envelope, the event base64-encoded inside.
type oldEnvelope struct {
	DestinationTopic string            `json:"destination_topic"`
	UUID             string            `json:"uuid"`
	Payload          []byte            `json:"payload"`
	Metadata         map[string]string `json:"metadata"`
}

// TestUpgradeCarriesTheBacklogOverOnce migrates a database to 00002 (the
// outbox of watermill-sql's DefaultPostgreSQLSchema), fills it the way the
// old forwarder left it — 100 events in 10 transactions, the first 40
// forwarded, a dead letter — and migrates up: the relay sends exactly the 60
// unforwarded events, once each and in order, and the dead letter holds the
// plain event. Then 00003 is reverted with a backlog left and the old layout
// holds it again, and re-applied.
func TestUpgradeCarriesTheBacklogOverOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testbed.NewDatabase(t)
	goose, err := postgres.MigrationProvider(db.SQL)
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 0)
	require.NoError(t, err)
	_, err = goose.UpTo(ctx, 2)
	require.NoError(t, err)

	var ids []string
	var positionXID string
	var positionOffset int64
	for tx := range 10 {
		require.NoError(t, postgres.InTx(ctx, db.Gorm, func(ptx postgres.Tx) error {
			for i := range 10 {
				seq := tx*10 + i
				id := uuid.NewString()
				env, err := json.Marshal(oldEnvelope{
					DestinationTopic: topic, UUID: id,
					Payload: fmt.Appendf(nil, `{"key":"purchase-%d","seq":%d}`, seq%3, seq),
					Metadata: map[string]string{
						"partition_key": fmt.Sprintf("purchase-%d", seq%3), "event_type": "pin.promotion.purchase-changed",
						"contract_version": "1", "correlation_id": "upgrade",
					},
				})
				if err != nil {
					return err
				}
				if err := ptx.GORM().Raw(`INSERT INTO outbox."pin_promotion_purchase_changed_v1" (uuid, payload, metadata, transaction_id)
					VALUES (?, ?, '{}', pg_current_xact_id()) RETURNING transaction_id::text, "offset"`,
					uuid.NewString(), env).Row().Scan(&positionXID, &positionOffset); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		}))
		if tx == 3 { // the old forwarder got this far: 40 forwarded
			_, err := db.SQL.Exec(`INSERT INTO outbox."pin_promotion_purchase_changed_v1_offsets"
				(consumer_group, offset_acked, last_processed_transaction_id) VALUES ('pin-outbox-forwarder', $1, $2::xid8)`,
				positionOffset, positionXID)
			require.NoError(t, err)
		}
	}
	deadEnv, err := json.Marshal(oldEnvelope{DestinationTopic: topic, UUID: "dead-1", Payload: []byte(`{"too":"large"}`),
		Metadata: map[string]string{"partition_key": "purchase-9"}})
	require.NoError(t, err)
	_, err = db.SQL.Exec(`INSERT INTO outbox.dead_letters (topic, message_id, outbox_offset, outbox_transaction_id, payload, metadata, error, attempts)
		VALUES ($1, 'dead-1', 7, pg_current_xact_id(), $2, '{}', 'too large', 5)`, topic, deadEnv)
	require.NoError(t, err)

	_, err = goose.Up(ctx)
	require.NoError(t, err)
	var deadEvent, deadKey string
	require.NoError(t, db.SQL.QueryRow(`SELECT payload::text, metadata->>'partition_key' FROM outbox.dead_letters`).Scan(&deadEvent, &deadKey))
	require.JSONEq(t, `{"too":"large"}`, deadEvent)
	require.Equal(t, "purchase-9", deadKey)

	brokers := testbed.NewKafka(t, topic)
	outboxRelay, err := relay.New(db.SQL, relay.Config{Brokers: brokers, Topics: []string{topic}, PollInterval: 10 * time.Millisecond},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	stop := testbed.StartRunner(t, outboxRelay)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	want, got := map[string][]string{}, map[string][]string{}
	for i, id := range ids[40:] {
		key := fmt.Sprintf("purchase-%d", (40+i)%3)
		want[key] = append(want[key], id)
	}
	n := 0
	waitCtx, cancel := context.WithTimeout(ctx, testbed.ForwardDeadline)
	defer cancel()
	for n < 60 && waitCtx.Err() == nil {
		cl.PollFetches(waitCtx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "message_id" {
					got[string(r.Key)] = append(got[string(r.Key)], string(h.Value))
					n++
				}
			}
		})
	}
	require.Equal(t, want, got, "the 60 unforwarded events, in commit order per key")
	stop()
	quiet, cancelQuiet := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelQuiet()
	require.Empty(t, cl.PollFetches(quiet).Records(), "nothing twice, nothing forwarded before the upgrade")

	// Down with a backlog of 5 (two of them keyless, as replays might be):
	// the old layout holds exactly those after the forwarder's position.
	_, err = db.SQL.Exec(`UPDATE outbox."pin_promotion_purchase_changed_v1" SET acked = false
		WHERE uuid = ANY($1)`, ids[95:])
	require.NoError(t, err)
	_, err = goose.DownTo(ctx, 2) // later migrations first, then 00003
	require.NoError(t, err)
	var backlog []string
	rows, err := db.SQL.Query(`SELECT payload->>'uuid' FROM outbox."pin_promotion_purchase_changed_v1" m
		WHERE NOT EXISTS (SELECT 1 FROM outbox."pin_promotion_purchase_changed_v1_offsets" o
			WHERE o.consumer_group = 'pin-outbox-forwarder'
			  AND (m.transaction_id, m."offset") <= (o.last_processed_transaction_id, COALESCE(o.offset_acked, 0)))
		ORDER BY transaction_id, "offset"`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		backlog = append(backlog, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, ids[95:], backlog)
	var event []byte
	require.NoError(t, db.SQL.QueryRow(`SELECT payload FROM outbox."pin_promotion_purchase_changed_v1" WHERE payload->>'uuid' = $1`, ids[99]).Scan(&event))
	var env oldEnvelope
	require.NoError(t, json.Unmarshal(event, &env))
	require.JSONEq(t, `{"key":"purchase-0","seq":99}`, string(env.Payload))
	require.Equal(t, "purchase-0", env.Metadata["partition_key"])

	_, err = goose.Up(ctx)
	require.NoError(t, err)
	var unacked int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM outbox."pin_promotion_purchase_changed_v1" WHERE NOT acked`).Scan(&unacked))
	require.Equal(t, 5, unacked)
}
