package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

func (b testBundle) rows(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, b.db.SQL.QueryRow(`SELECT count(*) FROM outbox.messages WHERE topic = $1`, topic).Scan(&n))
	return n
}

func TestPublishCommitsWithTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)

	msg := event("purchase-1", 1)
	b.publish(t, msg)
	require.Equal(t, 1, b.rows(t))

	// The row holds the event as it goes on the wire and the Kafka metadata.
	var id string
	var payload, metadata []byte
	var acked bool
	require.NoError(t, b.db.SQL.QueryRow(`SELECT uuid, payload, metadata, acked FROM outbox.messages WHERE topic = $1`, topic).
		Scan(&id, &payload, &metadata, &acked))
	require.Equal(t, msg.UUID, id)
	require.Equal(t, string(msg.Payload), string(payload), "byte for byte")
	require.False(t, acked)
	var meta map[string]string
	require.NoError(t, json.Unmarshal(metadata, &meta))
	require.Equal(t, "purchase-1", meta[kafka.MetaPartitionKey])
	require.Equal(t, msg.UUID, meta[kafka.MetaCorrelationID], "no request or run id: the message id")
	require.NotContains(t, meta, kafka.MetaTraceparent, "no active trace")
}

func TestPublishRollsBackWithTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("use case failed")

	err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		require.NoError(t, publish(b.ctx, b.pub, tx, topic, event("purchase-1", 1), event("purchase-2", 1)))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, b.rows(t))
}

func TestPublishRefusesIncompleteMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, key := range []string{kafka.MetaPartitionKey, kafka.MetaEventType, kafka.MetaContractVersion} {
		msg := event("purchase-1", 1)
		msg.Metadata.Set(key, "")
		err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			return publish(b.ctx, b.pub, tx, topic, event("purchase-1", 0), msg)
		})
		require.ErrorContains(t, err, key)
	}
	require.ErrorContains(t, publish(b.ctx, b.pub, postgres.Tx{}, topic, event("k", 1)), "outside a transaction")
	err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(b.ctx, b.pub, tx, "bad topic;drop", event("k", 1))
	})
	require.Error(t, err)
	require.Zero(t, b.rows(t))
}

func TestPublishCarriesTraceAndCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := outbox.NewPublisher(tp)
	require.NoError(t, err)

	ctx, span := tp.Tracer("test").Start(correlation.WithRequestID(b.ctx, "req-42"), "use case")
	defer span.End()
	msg := event("purchase-1", 1)
	require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(ctx, pub, tx, topic, msg)
	}))

	require.Equal(t, "req-42", msg.Metadata.Get(kafka.MetaCorrelationID))
	require.Equal(t, span.SpanContext().TraceID(), spanContextOf(msg.Context()).TraceID(), "SetContext(ctx)")
	carried := propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": msg.Metadata.Get(kafka.MetaTraceparent)})
	sc := spanContextOf(carried)
	require.True(t, sc.IsValid())
	require.Equal(t, span.SpanContext().TraceID(), sc.TraceID(), "the publication is part of the caller's trace")
	require.NotEqual(t, span.SpanContext().SpanID(), sc.SpanID(), "the traceparent is the publication's own span")
}

// TestMigrationMatchesWatermillSchema compares the migrated outbox table
// with the one watermill-sql's queue schema would create, column by column,
// so an upgrade of watermill that changes its layout fails here and not in
// production. The deliberate differences: "offset" is a bigint, and
// outbox.messages has the topic, in its primary key as a partitioned table's
// must be (ADR 0024).
func TestMigrationMatchesWatermillSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)

	_, err := b.db.SQL.Exec(`CREATE SCHEMA wm_reference`)
	require.NoError(t, err)
	schema := watermillsql.PostgreSQLQueueSchema{GenerateMessagesTableName: func(string) string { return `wm_reference.messages` }}
	qs, err := schema.SchemaInitializingQueries(watermillsql.SchemaInitializingQueriesParams{Topic: topic})
	require.NoError(t, err)
	for _, q := range qs {
		_, err := b.db.SQL.Exec(q.Query, q.Args...)
		require.NoError(t, err, q.Query)
	}
	theirs := describe(t, b, "wm_reference", "messages")
	for i, col := range theirs {
		theirs[i] = strings.Replace(col, "offset integer", "offset bigint", 1)
		theirs[i] = strings.Replace(theirs[i], "pk offset", "pk offset,topic", 1)
	}
	theirs = append(theirs, "topic text NO -")
	slices.Sort(theirs)
	require.Equal(t, theirs, describe(t, b, "outbox", "messages"))
}

// describe lists a table's columns (name, type, nullability, default with
// the table's own name taken out) and primary key.
func describe(tb testing.TB, b testBundle, schema, table string) []string {
	tb.Helper()
	out := b.strings(tb, `
		SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
		       COALESCE(regexp_replace(column_default, 'nextval\(.*\)', 'nextval'), '-')
		FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2
		UNION ALL
		SELECT 'pk ' || string_agg(a.attname, ',' ORDER BY k.ord)
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indisprimary AND i.indrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass
		ORDER BY 1`, schema, table)
	require.NotEmpty(tb, out)
	return out
}

// Publish stores each message byte for byte, in message order, with its
// metadata; it refuses, storing nothing, what the outbox cannot carry.
func TestPublishStoresMessagesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := []*message.Message{event("purchase-1", 1), event("purchase-2", 2), event("purchase-1", 3)}
	msgs[1].Metadata.Set("note", "a \"quoted\" <tag> & \x1e\n")
	b.publish(t, msgs...)

	stored := b.storedRows(t)
	require.Len(t, stored, len(msgs))
	for i, msg := range msgs {
		require.Equal(t, msg.UUID, stored[i].uuid, "message order")
		require.Equal(t, string(msg.Payload), stored[i].payload, "byte for byte")
		require.Equal(t, map[string]string(msg.Metadata), stored[i].metadata)
	}

	refused := map[string]func(*message.Message){
		"not JSON":           func(m *message.Message) { m.Payload = []byte(`{"key":`) },
		"empty":              func(m *message.Message) { m.Payload = nil },
		"record separator":   func(m *message.Message) { m.Payload = []byte("{}" + outbox.RowSeparator + "{}") },
		"separator in UUID":  func(m *message.Message) { m.UUID = "a" + outbox.RowSeparator + "b" },
		"separator in a key": func(m *message.Message) { m.Metadata.Set(kafka.MetaPartitionKey, "k"+outbox.RowSeparator) },
	}
	for name, spoil := range refused {
		bad := event("purchase-9", 1)
		spoil(bad)
		err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			return publish(b.ctx, b.pub, tx, topic, event("purchase-8", 1), bad)
		})
		require.Error(t, err, name)
	}
	require.Len(t, b.storedRows(t), len(msgs), "nothing of a refused publication is stored")
}

// changeQuery stands for a module's statement: written returns the ids it
// "wrote", and published hands the prepared events to outbox.publish with
// them, read by the final SELECT so that the call runs.
const changeQuery = `WITH written AS (SELECT unnest($1::text[]) AS id),
published AS (SELECT outbox.publish($2, ARRAY(SELECT id FROM written)))
SELECT id FROM written, published`

// A change's statement stores exactly the events whose key it wrote;
// Prepare refuses an event whose key names none of the change's rows, and
// nothing is stored when the statement fails.
func TestPreparedEventsAreStoredOnlyWithTheirRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	write := func(written, keys []string, msgs ...*message.Message) ([]string, error) {
		var ids []string
		err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			prepared, err := b.pub.Prepare(b.ctx, outbox.Events(topic, msgs...), keys)
			if err != nil {
				return err
			}
			rows, err := tx.QueryContext(b.ctx, changeQuery, written, prepared.Events())
			if err == nil {
				for rows.Next() {
					var id string
					require.NoError(t, rows.Scan(&id))
					ids = append(ids, id)
				}
				err = errors.Join(rows.Err(), rows.Close())
			}
			prepared.End(err)
			return err
		})
		return ids, err
	}

	msgs := []*message.Message{event("purchase-1", 1), event("purchase-2", 1), event("purchase-3", 1)}
	all := []string{"purchase-1", "purchase-2", "purchase-3"}
	ids, err := write([]string{"purchase-1", "purchase-3"}, all, msgs...)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"purchase-1", "purchase-3"}, ids)
	stored := b.storedRows(t)
	require.Len(t, stored, 2)
	require.ElementsMatch(t, []string{msgs[0].UUID, msgs[2].UUID}, []string{stored[0].uuid, stored[1].uuid})

	_, err = write(all, []string{"purchase-1"}, event("purchase-1", 2), event("purchase-9", 1))
	require.ErrorContains(t, err, `its key "purchase-9" names no row of the change`)
	_, err = write(all, nil, event("purchase-1", 2))
	require.ErrorContains(t, err, "names no row of the change", "a change without keys takes no event")

	notJSON := event("purchase-4", 1)
	notJSON.Payload = []byte(`{"key":`)
	_, err = write([]string{"purchase-4", "purchase-5"}, []string{"purchase-4", "purchase-5"}, event("purchase-5", 1), notJSON)
	require.ErrorContains(t, err, "json")
	require.Len(t, b.storedRows(t), 2, "nothing of a refused or failed write is stored")
}

// Prepare's checks are Write's: what Write refuses, Prepare refuses, and
// it ends the spans it started with the error.
func TestPrepareRefusesWhatTheOutboxCannotCarry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := outbox.NewPublisher(tp)
	require.NoError(t, err)

	bad := event("purchase-2", 1)
	bad.UUID = "a" + outbox.RowSeparator + "b"
	events := append(outbox.Events(topic, event("purchase-1", 1)), outbox.Events("pin.other.v1", bad)...)
	_, err = pub.Prepare(b.ctx, events, []string{"purchase-1", "purchase-2"})
	require.ErrorContains(t, err, "record separator")
	_, err = pub.Prepare(b.ctx, outbox.Events("bad topic;drop", event("purchase-1", 1)), []string{"purchase-1"})
	require.Error(t, err)

	ended := recorder.Ended()
	require.Len(t, ended, 2, "the first topic's span and the refused one's, both ended")
	for _, s := range ended {
		require.Equal(t, codes.Error, s.Status().Code, s.Name())
	}
	require.Len(t, recorder.Started(), len(ended), "no span left open")
}

type storedRow struct {
	uuid, payload string
	metadata      map[string]string
}

// storedRows reads the topic's outbox rows in offset order.
func (b testBundle) storedRows(tb testing.TB) []storedRow {
	tb.Helper()
	rs, err := b.db.SQL.Query(`SELECT uuid, payload, metadata FROM outbox.messages WHERE topic = $1 ORDER BY "offset"`, topic)
	require.NoError(tb, err)
	defer func() { _ = rs.Close() }()
	var out []storedRow
	for rs.Next() {
		var r storedRow
		var metadata []byte
		require.NoError(tb, rs.Scan(&r.uuid, &r.payload, &metadata))
		require.NoError(tb, json.Unmarshal(metadata, &r.metadata))
		out = append(out, r)
	}
	require.NoError(tb, rs.Err())
	return out
}

// On postgres.Autocommit each statement is its own transaction; Write is
// one statement whatever the topics, so its events commit together or not
// at all: a topic without a table fails the whole write, storing nothing.
func TestAutocommitWritesAllTopicsOrNone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tx, err := postgres.Autocommit(b.db.Gorm.WithContext(b.ctx))
	require.NoError(t, err)
	two := append(outbox.Events(topic, event("purchase-1", 1)), outbox.Events(topic+"-without-table", event("purchase-1", 1))...)
	require.ErrorContains(t, b.pub.Write(b.ctx, tx, two), "no partition")
	require.Zero(t, b.rows(t))

	require.NoError(t, b.pub.Write(b.ctx, tx, outbox.Events(topic, event("purchase-1", 1), event("purchase-2", 1))))
	require.Equal(t, 2, b.rows(t), "one statement, committed by itself")
}
