package outbox_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/deadletters"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// outboxRunbook is the operators' runbook whose dead-letter SQL the test
// runs as written.
const outboxRunbook = "../../docs/runbooks/outbox-backlog.md"

// TestRunbookReplaysADeadLetter runs the runbook's "Remove the cause" SQL,
// exactly as the runbook prints it, in a session of another time zone as an
// operator's psql may be, against a dead letter the relay made, then
// replays it as `pin outbox dead-letters replay` does: the event reaches
// Kafka with its original message id, key and headers, and the dead letter
// is gone.
func TestRunbookReplaysADeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	b.startRelay(t, relay.Config{Brokers: brokers}, nil)

	// The runbook takes the key from the event's aggregateId.
	const purchaseID = "01a22af3-4279-7bd5-b202-7b2215989db8"
	original := event(purchaseID, 1)
	original.Payload = []byte(`{"messageId":"` + original.UUID + `","aggregateId":"` + purchaseID + `"}`)
	original.Metadata.Set(kafka.MetaCorrelationID, "req-replay")
	b.publish(t, original)
	c := newConsumer(t, brokers)
	first := c.until(t, 1)[0]

	// The same event again, written without its key as a manual insert
	// could: the relay dead-letters it.
	_, err := b.db.SQL.Exec(`INSERT INTO outbox.messages (topic, uuid, payload, metadata)
		SELECT topic, uuid, payload, (metadata::jsonb - 'partition_key')::json
		FROM outbox.messages WHERE topic = $2 AND uuid = $1`, original.UUID, topic)
	require.NoError(t, err)
	waitFor(t, "the keyless copy to be dead-lettered", func() bool { _, _, dead := b.stats(t); return dead == 1 })
	var id int64
	require.NoError(t, b.db.SQL.QueryRow(`SELECT id FROM `+outbox.DeadLetterTable+` WHERE message_id = $1`, original.UUID).Scan(&id))

	runbook, err := os.ReadFile(outboxRunbook)
	require.NoError(t, err)
	conn, err := b.db.SQL.Conn(b.ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(b.ctx, `SET TimeZone = 'Asia/Tokyo'`)
	require.NoError(t, err)
	script := strings.ReplaceAll(sqlAfter(t, string(runbook), "### 2. Remove the cause"), "<id>", strconv.FormatInt(id, 10))
	_, err = conn.ExecContext(b.ctx, script)
	require.NoError(t, err, script)
	_, err = conn.ExecContext(b.ctx, `RESET TimeZone`)
	require.NoError(t, err)
	_, err = deadletters.Replay(b.ctx, b.db.SQL, []int64{id})
	require.NoError(t, err)

	replayed := c.until(t, 2)[1]
	require.Equal(t, string(first.Key), string(replayed.Key))
	require.Equal(t, string(first.Value), string(replayed.Value))
	require.Equal(t, headers(first), headers(replayed), "same message id, event type, version, correlation id, traceparent")
	waitFor(t, "the dead letter to be gone", func() bool { n, _, dead := b.stats(t); return n == 0 && dead == 0 })
}

// sqlAfter returns the first ```sql block of the section under heading in
// a Markdown document.
func sqlAfter(tb testing.TB, doc, heading string) string {
	tb.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	require.True(tb, ok, "no heading %q in the runbook", heading)
	rest, _, _ = strings.Cut(rest, "\n#")
	_, rest, ok = strings.Cut(rest, "```sql\n")
	require.True(tb, ok, "no SQL block after %q", heading)
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(tb, ok, "unterminated SQL block after %q", heading)
	return block
}
