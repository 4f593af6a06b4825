package main_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestOutboxDeadLettersListAndReplay drives `pin outbox dead-letters` with
// only PIN_DATABASE_URL: list prints the dead letter as one JSON line, bad
// command lines exit 2 and an unknown id exits 1 with nothing changed, a
// replay queues it with its original messageId and a second replay of the
// same id exits 1; then `pin serve` sends it to Kafka with that message_id.
func TestOutboxDeadLettersListAndReplay(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	purchaseID, messageID := uuid.NewString(), uuid.NewString()
	var id int64
	require.NoError(t, db.SQL.QueryRow(`INSERT INTO outbox.dead_letters
		(topic, message_id, outbox_offset, payload, metadata, error, attempts)
		VALUES ($1, $2, 41, $3, $4, 'kafka server: Message was too large', 5) RETURNING id`,
		topic, messageID, `{"messageId":"`+messageID+`","aggregateId":"`+purchaseID+`"}`,
		`{"partition_key":"`+purchaseID+`","event_type":"pin.promotion.purchase-changed","contract_version":"1","correlation_id":"req-1"}`,
	).Scan(&id))
	idArg := strconv.FormatInt(id, 10)

	out, stderr, code := run(t, env, "outbox", "dead-letters", "list")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, out)
	var listed map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &listed), "one JSON object a line")
	require.EqualValues(t, id, listed["id"])
	require.Equal(t, messageID, listed["messageId"])
	require.Equal(t, topic, listed["topic"])
	require.Equal(t, purchaseID, listed["metadata"].(map[string]any)["partition_key"])
	out, stderr, code = run(t, env, "outbox", "dead-letters", "list", "--topic", "another.topic")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out, "stdout stays clean for scripts")
	require.Equal(t, "no outbox dead letters\n", stderr, "an empty list says so")

	for _, args := range [][]string{
		{"outbox"}, {"outbox", "dead-letters"}, {"outbox", "dead-letters", "purge"},
		{"outbox", "dead-letters", "list", "extra"},
		{"outbox", "dead-letters", "replay"}, {"outbox", "dead-letters", "replay", "abc"},
		{"outbox", "dead-letters", "replay", "--all", idArg}, {"outbox", "dead-letters", "replay", "--topic", topic, idArg},
		{"outbox", "dead-letters", "list", "--limit", "x"}, {"outbox", "dead-letters", "discard", idArg},
		{"outbox", "dead-letters", "discard", "--reason", "why"},
	} {
		_, stderr, code := run(t, env, args...)
		require.Equal(t, 2, code, "pin %v: %s", args, stderr)
	}
	_, stderr, code = run(t, env, "outbox", "dead-letters", "replay", idArg, "999999")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "999999")
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM outbox.dead_letters`), "all or nothing")

	out, stderr, code = run(t, env, "outbox", "dead-letters", "replay", idArg)
	require.Equal(t, 0, code, stderr)
	var replayed map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &replayed), out)
	require.Equal(t, messageID, replayed["messageId"])
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM outbox."pin_promotion_purchase_changed_v1" WHERE NOT acked AND uuid = '`+messageID+`'`))
	require.Equal(t, 0, countRows(t, db, `SELECT count(*) FROM outbox.dead_letters`))

	_, stderr, code = run(t, env, "outbox", "dead-letters", "replay", idArg)
	require.Equal(t, 1, code, "a second replay of the same id: %s", stderr)
	require.Contains(t, stderr, "already replayed")
	out, stderr, code = run(t, env, "outbox", "dead-letters", "replay", "--all")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out, "nothing left to replay")
	require.Equal(t, "no dead letters to replay\n", stderr)
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM outbox."pin_promotion_purchase_changed_v1" WHERE uuid = '`+messageID+`'`))

	brokers := testbed.NewKafka(t, topic)
	startServer(t, serveEnv(t, db, brokers), "serve")
	records := purchaseRecords(t, brokers, nil, purchaseID, 1)
	require.Len(t, records, 1)
	got := map[string]string{}
	for _, h := range records[0].Headers {
		got[h.Key] = string(h.Value)
	}
	require.Equal(t, messageID, got["message_id"], "the original messageId, so consumers deduplicate it")
	require.Equal(t, "req-1", got["correlation_id"])
}

// countRows runs a count query on db.
func countRows(t *testing.T, db *testbed.Database, query string) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL.QueryRow(query).Scan(&n))
	return n
}

// TestOutboxReplayAllIsNeverBlocked: `pin outbox dead-letters replay --all`
// replays what it can and names each one it cannot with the reason,
// exiting 1 only when it could replay none; a dead letter that never will
// be is discarded with a reason, listed only with --discarded, and counted
// apart by `pin status`; --limit caps a list.
func TestOutboxReplayAllIsNeverBlocked(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	insert := func(messageID, key string) string {
		t.Helper()
		var id int64
		require.NoError(t, db.SQL.QueryRow(`INSERT INTO outbox.dead_letters
			(topic, message_id, outbox_offset, payload, metadata, error, attempts)
			VALUES ($1, $2, 1, '{"seq":1}', $3, 'kafka: refused', 5) RETURNING id`,
			topic, messageID, `{"partition_key":"`+key+`"}`).Scan(&id))
		return strconv.FormatInt(id, 10)
	}
	keyless := insert(uuid.NewString(), "")
	good := insert(uuid.NewString(), "p-1")

	out, stderr, code := run(t, env, "outbox", "dead-letters", "list", "--limit", "1")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 1, "--limit caps the list")
	require.Contains(t, out, `"id":`+keyless+`,`, "oldest first")

	out, stderr, code = run(t, env, "outbox", "dead-letters", "replay", "--all")
	require.Equal(t, 0, code, "one was replayed: %s", stderr)
	require.Contains(t, out, `"id":`+good+`,`)
	require.Contains(t, stderr, "dead letter "+keyless+" not replayed: ")
	require.Contains(t, stderr, "partition_key")
	requireNoSQL(t, stderr)

	_, stderr, code = run(t, env, "outbox", "dead-letters", "replay", "--all")
	require.Equal(t, 1, code, "nothing could be done: %s", stderr)
	require.Contains(t, stderr, "dead letter "+keyless+" not replayed: ")

	out, stderr, code = run(t, env, "outbox", "dead-letters", "discard", keyless, "--reason", "no key: written by a bug fixed since")
	require.Equal(t, 0, code, stderr)
	var discarded map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &discarded), out)
	require.Equal(t, "no key: written by a bug fixed since", discarded["discardReason"])
	_, stderr, code = run(t, env, "outbox", "dead-letters", "discard", keyless, "--reason", "again")
	require.Equal(t, 1, code, "already discarded: %s", stderr)

	_, stderr, code = run(t, env, "outbox", "dead-letters", "replay", "--all")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "no dead letters to replay\n", stderr)
	_, stderr, code = run(t, env, "outbox", "dead-letters", "replay", keyless)
	require.Equal(t, 1, code, "a discarded one is not replayed: %s", stderr)
	out, stderr, code = run(t, env, "outbox", "dead-letters", "list", "--discarded")
	require.Equal(t, 0, code, stderr)
	var listed map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Equal(t, "no key: written by a bug fixed since", listed["discardReason"])

	out, stderr, code = run(t, env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var status struct {
		Outbox []struct {
			DeadLetters          int `json:"deadLetters"`
			DiscardedDeadLetters int `json:"discardedDeadLetters"`
		} `json:"outbox"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status), out)
	require.Len(t, status.Outbox, 1+len(testOnlyTopics), "each declared topic, promotion's first")
	require.Equal(t, 0, status.Outbox[0].DeadLetters)
	require.Equal(t, 1, status.Outbox[0].DiscardedDeadLetters)
}
