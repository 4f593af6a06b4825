package promotiontest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/testbed"
)

// Publisher is an outbox publisher for a test; a nil tracer provider
// records nothing.
func Publisher(tb testing.TB, tp trace.TracerProvider) *outbox.Publisher {
	tb.Helper()
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	p, err := outbox.NewPublisher(tp)
	require.NoError(tb, err)
	return p
}

// OutboxEvent is one message of the promotion topic's outbox, decoded the
// way a consumer decodes it (contract.Decode). It asserts nothing about the
// event: the tests that read it do.
type OutboxEvent struct {
	MessageID string            // the outbox message's UUID
	Metadata  map[string]string // becomes the Kafka key and headers
	Envelope  contract.Envelope
	Raw       []byte // the event's JSON, as Kafka will carry it
}

// OutboxEvents returns every message in the promotion topic's outbox
// table, in the order they were written.
func OutboxEvents(tb testing.TB, db *testbed.Database) []OutboxEvent {
	tb.Helper()
	rows, err := db.SQL.QueryContext(context.Background(),
		`SELECT uuid, payload, metadata FROM outbox.messages WHERE topic = $1 ORDER BY "offset"`, contract.Topic)
	require.NoError(tb, err)
	defer rows.Close()
	quiet := slog.New(slog.DiscardHandler)
	var out []OutboxEvent
	for rows.Next() {
		var e OutboxEvent
		var metadata []byte
		require.NoError(tb, rows.Scan(&e.MessageID, &e.Raw, &metadata))
		require.NoError(tb, json.Unmarshal(metadata, &e.Metadata))
		e.Envelope, err = contract.Decode(e.Raw, quiet)
		require.NoError(tb, err)
		out = append(out, e)
	}
	require.NoError(tb, rows.Err())
	return out
}

// OutboxCount is the number of messages in the promotion topic's outbox.
func OutboxCount(tb testing.TB, db *testbed.Database) int {
	tb.Helper()
	return Count(tb, db, `SELECT count(*) FROM outbox.messages WHERE topic = $1`, contract.Topic)
}

// EventsByPurchase groups the events whose status is one of statuses by
// purchase, keeping their order.
func EventsByPurchase(events []OutboxEvent, statuses ...contract.Status) map[uuid.UUID][]OutboxEvent {
	out := map[uuid.UUID][]OutboxEvent{}
	for _, e := range events {
		for _, s := range statuses {
			if e.Envelope.Payload.Status == s {
				out[e.Envelope.AggregateID] = append(out[e.Envelope.AggregateID], e)
				break
			}
		}
	}
	return out
}
