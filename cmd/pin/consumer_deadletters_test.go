package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestConsumerDeadLettersListAndReplay: in `pin dev`, a trigger makes the
// boost projection refuse one purchase's record until it is dead-lettered.
// `pin consumer dead-letters list` shows it as one JSON line; bad command
// lines exit 2; a replay while the cause remains, of an unknown id, of
// another consumer's or of a minimal dead letter exits 1 with nothing
// changed. Once the trigger is gone, the replay applies it to the
// projection; a second replay of that id exits 1, and a second dead letter
// of the same record is replayed as a duplicate, leaving the boost as it is.
func TestConsumerDeadLettersListAndReplay(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.Exec(query, args...)
		require.NoError(t, err)
	}
	project := uuid.NewString()
	// A class 23 code: the record's own data is refused. Any other code is a
	// fault of the database, which restarts the consumer instead.
	exec(`CREATE FUNCTION boost.black_box_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.target_id = '` + project + `' THEN RAISE EXCEPTION 'black box refuses this target' USING ERRCODE = 'check_violation'; END IF;
	RETURN NEW;
END $$`)
	exec(`CREATE TRIGGER black_box_refuse BEFORE INSERT ON boost.purchase_targets
		FOR EACH ROW EXECUTE FUNCTION boost.black_box_refuse()`)

	s := startDev(t, db)
	tok := token(t, uuid.New())
	purchase := s.purchaseProject(t, tok, s.packageID(t, tok, "project-boost-week"), project)
	testbed.Eventually(t, func() error {
		if countRows(t, db, `SELECT count(*) FROM consumer.dead_letters WHERE consumer = 'boost'`) == 0 {
			return errors.New("no dead letter yet")
		}
		return nil
	})

	out, stderr, code := run(t, env, "consumer", "dead-letters", "list", "--group", "boost")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, out)
	var listed map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &listed), "one JSON object a line")
	require.Equal(t, "boost", listed["group"])
	require.Equal(t, topic, listed["topic"])
	require.Equal(t, purchase, listed["key"])
	require.Contains(t, listed["value"], purchase, "a UTF-8 value is shown as text")
	require.Contains(t, listed["error"], "black box refuses this target")
	require.Equal(t, true, listed["replayable"])
	messageID := listed["messageId"].(string)
	require.NotEmpty(t, messageID)
	require.Contains(t, listed["headers"], map[string]any{"key": "message_id", "value": messageID})
	id := strconv.FormatInt(int64(listed["id"].(float64)), 10)
	out, stderr, code = run(t, env, "consumer", "dead-letters", "list", "--group", "catalog")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out, "stdout stays clean for scripts")
	require.Equal(t, "no consumer dead letters\n", stderr, "an empty list says so")

	// A second dead letter of the same record, as a re-published event
	// refused again would leave; another consumer's; and a minimal one.
	var copyID, otherID, minimalID int64
	require.NoError(t, db.SQL.QueryRow(`INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset,
			record_key, headers, header_keys, header_values, value, error, attempts)
		SELECT consumer, topic, kafka_partition, kafka_offset + 1000000, record_key, headers, header_keys, header_values,
			value, error, attempts FROM consumer.dead_letters WHERE id = $1 RETURNING id`, id).Scan(&copyID))
	require.NoError(t, db.SQL.QueryRow(`INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset,
			record_key, headers, header_keys, header_values, value, error, attempts)
		SELECT 'catalog', topic, kafka_partition, kafka_offset, record_key, headers, header_keys, header_values,
			value, error, attempts FROM consumer.dead_letters WHERE id = $1 RETURNING id`, id).Scan(&otherID))
	require.NoError(t, db.SQL.QueryRow(`INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset,
			error, attempts, refused_sqlstate)
		VALUES ('boost', $1, 0, 999999, 'refused', 1, '22021') RETURNING id`, topic).Scan(&minimalID))
	deadLetters := func() int { return countRows(t, db, `SELECT count(*) FROM consumer.dead_letters`) }

	for _, args := range [][]string{
		{"consumer"}, {"consumer", "dead-letters"}, {"consumer", "dead-letters", "purge"},
		{"consumer", "dead-letters", "list", "extra"},
		{"consumer", "dead-letters", "replay"}, {"consumer", "dead-letters", "replay", "abc"},
		{"consumer", "dead-letters", "replay", "--all", id}, {"consumer", "dead-letters", "replay", "--group", "boost", id},
		{"consumer", "dead-letters", "list", "--limit", "-1"},
		{"consumer", "dead-letters", "discard", id}, {"consumer", "dead-letters", "discard", id, "--reason", " "},
		{"consumer", "dead-letters", "discard", "--reason", "why"},
	} {
		_, stderr, code := run(t, env, args...)
		require.Equal(t, 2, code, "pin %v: %s", args, stderr)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{id}, "black box refuses this target"}, // the cause is still there
		{[]string{id, "999999999"}, "999999999"},
		{[]string{strconv.FormatInt(otherID, 10)}, `"catalog"`},
		{[]string{strconv.FormatInt(minimalID, 10)}, "minimal"},
		{[]string{"--all", "--group", "catalog"}, `"catalog"`},
	} {
		_, stderr, code := run(t, env, append([]string{"consumer", "dead-letters", "replay"}, tt.args...)...)
		require.Equal(t, 1, code, "replay %v: %s", tt.args, stderr)
		require.Contains(t, stderr, tt.says, "replay %v", tt.args)
		requireNoSQL(t, stderr)
		require.Equal(t, 4, deadLetters(), "replay %v: nothing changed", tt.args)
	}
	// While the cause remains, --all can do nothing: it names each one it
	// could not replay and why, and exits 1.
	out, stderr, code = run(t, env, "consumer", "dead-letters", "replay", "--all")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, out)
	for _, n := range []string{id, strconv.FormatInt(copyID, 10), strconv.FormatInt(otherID, 10), strconv.FormatInt(minimalID, 10)} {
		require.Contains(t, stderr, "dead letter "+n+" not replayed: ", "each one is reported")
	}
	requireNoSQL(t, stderr)
	require.Equal(t, 4, deadLetters())
	out, stderr, code = run(t, env, "consumer", "dead-letters", "list", "--limit", "2")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, "--limit caps the list")
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 0, 0)

	exec(`DROP TRIGGER black_box_refuse ON boost.purchase_targets`)
	out, stderr, code = run(t, env, "consumer", "dead-letters", "replay", id)
	require.Equal(t, 0, code, stderr)
	var replayed map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &replayed), out)
	require.Equal(t, "applied", replayed["outcome"])
	require.Equal(t, messageID, replayed["messageId"])
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 10, 1)

	_, stderr, code = run(t, env, "consumer", "dead-letters", "replay", id)
	require.Equal(t, 1, code, "a second replay of the same id: %s", stderr)
	require.Contains(t, stderr, "already replayed")
	// --all replays what it can and reports the rest: one that can never
	// be replayed no longer blocks the others.
	out, stderr, code = run(t, env, "consumer", "dead-letters", "replay", "--all", "--group", "boost")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &replayed), out)
	require.EqualValues(t, copyID, replayed["id"], "--all replays what it can: %s", out)
	require.Equal(t, "duplicate", replayed["outcome"], "the inbox knows its messageId")
	require.Contains(t, stderr, fmt.Sprintf("dead letter %d not replayed: ", minimalID))
	require.Contains(t, stderr, "minimal")
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 10, 1)
	out, stderr, code = run(t, env, "consumer", "dead-letters", "replay", "--all")
	require.Equal(t, 1, code, "nothing left this binary can replay: %s", stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, fmt.Sprintf("dead letter %d not replayed: ", otherID))
	require.Contains(t, stderr, fmt.Sprintf("dead letter %d not replayed: ", minimalID))
	require.Equal(t, 2, deadLetters(), "the minimal one and another consumer's stay")

	// Discarded with a reason, they leave the list and --all, and are kept.
	minimal, other := strconv.FormatInt(minimalID, 10), strconv.FormatInt(otherID, 10)
	_, stderr, code = run(t, env, "consumer", "dead-letters", "discard", minimal, "999999999", "--reason", "x")
	require.Equal(t, 1, code, "an unknown id: %s", stderr)
	require.Contains(t, stderr, "999999999")
	out, stderr, code = run(t, env, "consumer", "dead-letters", "discard", minimal, other, "--reason", "record lost with the topic's retention")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, out)
	_, stderr, code = run(t, env, "consumer", "dead-letters", "discard", minimal, "--reason", "again")
	require.Equal(t, 1, code, "discarded once: %s", stderr)
	out, stderr, code = run(t, env, "consumer", "dead-letters", "replay", "--all")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out)
	require.Equal(t, "no dead letters to replay\n", stderr)
	_, stderr, code = run(t, env, "consumer", "dead-letters", "list")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "no consumer dead letters\n", stderr)
	out, stderr, code = run(t, env, "consumer", "dead-letters", "list", "--discarded", "--group", "boost")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.EqualValues(t, minimalID, listed["id"])
	require.Equal(t, "record lost with the topic's retention", listed["discardReason"])
	require.NotEmpty(t, listed["discardedAt"])
	require.Equal(t, 2, deadLetters(), "a discarded dead letter is kept")
}

// requireNoSQL fails when an operator command's output carries SQL: a
// failed replay says what failed, not the statement.
func requireNoSQL(t *testing.T, output string) {
	t.Helper()
	for _, keyword := range []string{"SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "[rows:"} {
		require.NotContains(t, output, keyword)
	}
}
