package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

func (b testBundle) rows(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, b.db.SQL.QueryRow(`SELECT count(*) FROM `+outbox.TableName(topic)).Scan(&n))
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
	require.NoError(t, b.db.SQL.QueryRow(`SELECT uuid, payload, metadata, acked FROM `+outbox.TableName(topic)).
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
		require.NoError(t, b.pub.Publish(b.ctx, tx, topic, event("purchase-1", 1), event("purchase-2", 1)))
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
			return b.pub.Publish(b.ctx, tx, topic, event("purchase-1", 0), msg)
		})
		require.ErrorContains(t, err, key)
	}
	require.ErrorContains(t, b.pub.Publish(b.ctx, postgres.Tx{}, topic, event("k", 1)), "outside a transaction")
	err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return b.pub.Publish(b.ctx, tx, "bad topic;drop", event("k", 1))
	})
	require.Error(t, err)
	require.Zero(t, b.rows(t))
}

func TestPublishCarriesTraceAndCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := outbox.NewPublisher(b.logger, tp)
	require.NoError(t, err)

	ctx, span := tp.Tracer("test").Start(observability.WithRequestID(b.ctx, "req-42"), "use case")
	defer span.End()
	msg := event("purchase-1", 1)
	require.NoError(t, postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return pub.Publish(ctx, tx, topic, msg)
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
// production. The one deliberate difference: "offset" is a bigint.
func TestMigrationMatchesWatermillSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)

	_, err := b.db.SQL.Exec(`CREATE SCHEMA wm_reference`)
	require.NoError(t, err)
	schema := outbox.SchemaAdapter(0)
	schema.GenerateMessagesTableName = func(string) string { return `wm_reference.messages` }
	qs, err := schema.SchemaInitializingQueries(watermillsql.SchemaInitializingQueriesParams{Topic: topic})
	require.NoError(t, err)
	for _, q := range qs {
		_, err := b.db.SQL.Exec(q.Query, q.Args...)
		require.NoError(t, err, q.Query)
	}
	theirs := describe(t, b, "wm_reference", "messages")
	for i, col := range theirs {
		theirs[i] = strings.Replace(col, "offset integer", "offset bigint", 1)
	}
	require.Equal(t, theirs, describe(t, b, "outbox", "pin_promotion_purchase_changed_v1"))
	require.Equal(t, `outbox."pin_promotion_purchase_changed_v1"`, outbox.TableName(topic))
}

// describe lists a table's columns (name, type, nullability, default with
// the table's own name taken out) and primary key.
func describe(tb testing.TB, b testBundle, schema, table string) []string {
	tb.Helper()
	rows, err := b.db.SQL.Query(`
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
	require.NoError(tb, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(tb, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(tb, rows.Err())
	require.NotEmpty(tb, out)
	return out
}

// Prepare readies rows for a caller's own insert with what Publish would
// write: the topic's table, the payload byte for byte, the metadata with its
// correlation id; it refuses what Publish refuses.
func TestPrepareReadiesRowsAsPublishWould(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := []*message.Message{event("purchase-1", 1), event("purchase-2", 2), event("purchase-3", 3)}
	msgs[1].Metadata.Set("note", "a \"quoted\" <tag> & \x1e\n")
	rows, err := b.pub.Prepare(b.ctx, topic, msgs...)
	require.NoError(t, err)
	require.Equal(t, outbox.TableName(topic), rows.Table)
	require.NoError(t, rows.Done(b.insertRows(t, rows)))

	// What Prepare readied and Columns inserted is what Publish stores.
	stored := b.storedRows(t)
	require.Len(t, stored, len(msgs))
	for i, msg := range msgs {
		require.Equal(t, msg.UUID, stored[i].uuid, "message order")
		require.Equal(t, string(msg.Payload), stored[i].payload, "byte for byte")
		require.Equal(t, map[string]string(msg.Metadata), stored[i].metadata)
	}
	require.Equal(t, msgs[0].UUID, stored[0].metadata[kafka.MetaCorrelationID], "no request or run id: the message id")

	incomplete := event("purchase-4", 1)
	incomplete.Metadata.Set(kafka.MetaEventType, "")
	_, err = b.pub.Prepare(b.ctx, topic, incomplete)
	require.ErrorContains(t, err, kafka.MetaEventType)
	_, err = b.pub.Prepare(b.ctx, "bad topic;drop", event("k", 1))
	require.Error(t, err)
	separated := event("purchase-5", 1)
	separated.Payload = []byte("{}" + outbox.RowSeparator + "{}")
	_, err = b.pub.Prepare(b.ctx, topic, separated)
	require.ErrorContains(t, err, "not JSON")
	empty := event("purchase-5", 1)
	empty.Payload = nil
	_, err = b.pub.Prepare(b.ctx, topic, empty)
	require.ErrorContains(t, err, "not JSON")
	comma := event("purchase-6", 1)
	comma.UUID = "a,b"
	_, err = b.pub.Prepare(b.ctx, topic, comma)
	require.ErrorContains(t, err, "comma")

	// The payload is parsed by the json column: an insert of one that is not
	// JSON fails whole, and Done reports it.
	notJSON := event("purchase-7", 1)
	notJSON.Payload = []byte(`{"key":`)
	rows, err = b.pub.Prepare(b.ctx, topic, event("purchase-8", 1), notJSON)
	require.NoError(t, err)
	err = rows.Done(b.insertRows(t, rows))
	require.ErrorContains(t, err, "json")
	require.Len(t, b.storedRows(t), len(msgs), "nothing of the refused insert is stored")
}

// insertRows inserts rows as a caller of Prepare does, in a transaction of
// its own.
func (b testBundle) insertRows(tb testing.TB, rows *outbox.Rows) error {
	tb.Helper()
	return postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		_, err := tx.Exec.ExecContext(b.ctx, `INSERT INTO `+rows.Table+` (uuid, payload, metadata)
	SELECT r.uuid, r.payload::json, r.metadata::json
	FROM unnest(`+rows.Columns(1)+`) WITH ORDINALITY AS r(uuid, payload, metadata, ord)
	ORDER BY r.ord`, rows.Args()...)
		return err
	})
}

type storedRow struct {
	uuid, payload string
	metadata      map[string]string
}

// storedRows reads the topic's outbox rows in offset order.
func (b testBundle) storedRows(tb testing.TB) []storedRow {
	tb.Helper()
	rs, err := b.db.SQL.Query(`SELECT uuid, payload, metadata FROM ` + outbox.TableName(topic) + ` ORDER BY "offset"`)
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
