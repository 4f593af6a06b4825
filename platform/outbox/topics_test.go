package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// tableShape is what makes a topic's table the one definition's: its
// columns (name, type, nullability, default), index definitions and storage
// options, with the table's own name and topic written as placeholders and
// index names left out (the migrated table keeps those of 00003).
const tableShape = `SELECT 'column ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
		CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
		COALESCE(' default ' || replace(pg_get_expr(d.adbin, d.adrelid), quote_literal($2), '<topic>'), '')
	FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || regexp_replace(replace(pg_get_indexdef(i.indexrelid), c.relname, '<table>'), 'INDEX \S+ ON', 'INDEX ON')
	FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE i.indrelid = $1::regclass
UNION ALL
SELECT 'option ' || o FROM pg_class c, unnest(c.reloptions) o WHERE c.oid = $1::regclass
UNION ALL
SELECT 'partition of ' || p.inhparent::regclass::text FROM pg_inherits p WHERE p.inhrelid = $1::regclass
ORDER BY 1`

// TestATopicsTableIsTheOneDefinition: the promotion topic's table, made by
// migrations 00001, 00003 and 00012, and a table outbox.create_topic makes
// are the same but for their topic: a change to either that forgets the
// other fails here.
func TestATopicsTableIsTheOneDefinition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "pin.test.shape.v1"
	require.NoError(t, outbox.EnsureTopics(b.ctx, b.db.SQL, other))

	migrated := b.strings(t, tableShape, `outbox."pin_promotion_purchase_changed_v1"`, topic)
	made := b.strings(t, tableShape, `outbox."pin_test_shape_v1"`, other)
	t.Logf("the one definition:\n%s", strings.Join(made, "\n"))
	require.Contains(t, made, "column topic text not null default <topic>::text")
	require.Contains(t, made, "partition of outbox.messages")
	require.Equal(t, migrated, made)
}

// TestCreateTopicIsIdempotentAndRefusesBadTopics: making a topic's table
// twice returns the same table and leaves its rows; a topic Kafka would not
// take, or whose table name is another topic's, is refused and nothing is
// made.
func TestCreateTopicIsIdempotentAndRefusesBadTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "pin.test.twice.v1"
	var first, second string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT outbox.create_topic($1)::text`, other).Scan(&first))
	_, err := b.db.SQL.Exec(`INSERT INTO outbox.messages (topic, uuid) VALUES ($1, 'kept')`, other)
	require.NoError(t, err)
	require.NoError(t, b.db.SQL.QueryRow(`SELECT outbox.create_topic($1)::text`, other).Scan(&second))
	require.Equal(t, `outbox.pin_test_twice_v1`, first)
	require.Equal(t, first, second)
	require.NoError(t, outbox.EnsureTopics(b.ctx, b.db.SQL, other, topic), "the migrated topic is ensured too")
	var n int
	require.NoError(t, b.db.SQL.QueryRow(`SELECT count(*) FROM outbox.messages WHERE topic = $1`, other).Scan(&n))
	require.Equal(t, 1, n, "a second create_topic keeps the rows")

	partitions := func() int {
		var n int
		require.NoError(t, b.db.SQL.QueryRow(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.messages'::regclass`).Scan(&n))
		return n
	}
	before := partitions()
	for _, c := range []struct{ topic, code string }{
		{"pin test", "22023"},                      // a space: no Kafka topic
		{"pin.test.twice-v1", "42P07"},             // the table name of pin.test.twice.v1
		{strings.Repeat("x", 64), "22023"},         // too long for a table name
		{"pin.test.ok.v1'; DROP TABLE x", "22023"}, // nor SQL
	} {
		_, err := b.db.SQL.Exec(`SELECT outbox.create_topic($1)`, c.topic)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, c.topic)
		require.Equal(t, c.code, pgErr.Code, "%s: %s", c.topic, pgErr.Message)
	}
	// EnsureTopics is one statement: a bad topic among good ones makes none.
	require.Error(t, outbox.EnsureTopics(b.ctx, b.db.SQL, "pin.test.fine.v1", "pin.test.twice-v1"))
	require.Equal(t, before, partitions(), "a refused topic made no table")
}

// TestATopicWithNoTableWaitsAndTheOthersAreRelayed: a topic the relay is
// given but whose table `pin migrate up` never made is logged at ERROR with
// its name and the fix, and waits; the other topics are relayed meanwhile,
// and the waiting one is relayed once its table is made.
func TestATopicWithNoTableWaitsAndTheOthersAreRelayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const unmade = "pin.test.unmade.v1"
	logs := &testbed.LogBuffer{}
	b.logger = slog.New(slog.NewJSONHandler(logs, nil))
	brokers := testbed.NewKafka(t, topic, unmade)
	b.startRelay(t, relay.Config{Brokers: brokers, Topics: []string{topic, unmade}, MaxReconnectBackoff: time.Second}, nil)

	b.publish(t, event("made", 1))
	newConsumer(t, brokers).until(t, 1)
	waitFor(t, "the unmade topic's error", func() bool {
		for _, rec := range logs.Records(t, "outbox relay: a topic has no outbox table; it waits, the other topics are relayed") {
			if rec["topic"] == unmade && rec["level"] == "ERROR" && strings.Contains(fmt.Sprint(rec["err"]), "pin migrate up") {
				return true
			}
		}
		return false
	})

	require.NoError(t, outbox.EnsureTopics(b.ctx, b.db.SQL, unmade))
	require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(b.ctx, b.pub, tx, unmade, event("late", 1))
	}))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(unmade), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(b.ctx, testbed.ForwardDeadline)
	defer cancel()
	require.NotEmpty(t, cl.PollFetches(ctx).Records(), "the topic is relayed once its table is made")
}
