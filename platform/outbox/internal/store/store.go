// Package store is the one place that knows the layout of the outbox tables
// (migration 00012, docs/adr/0024-the-outbox-owns-its-table.md): every
// statement on outbox.messages and outbox.dead_letters is here, literal and
// whole, with the topic as a parameter. The relay and the dead-letter
// commands call its functions; being internal to platform/outbox, modules
// cannot. Every statement uses $n parameters.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Messages is the outbox table, partitioned by topic.
const Messages = "outbox.messages"

// DeadLetters holds the messages the relay gave up on.
const DeadLetters = "outbox.dead_letters"

// Querier is a session, a pool or a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// planNow has PostgreSQL plan a statement for the outbox as it is when the
// statement runs, and for the topic it names: pgx would otherwise prepare
// it once per session, and the plan made for an empty outbox (a sequential
// scan) would stay until an ANALYZE. With the topic a value of each
// execution, the planner prunes to the topic's partition at plan time.
// Planning costs tens of microseconds. Statements that run on pooled
// sessions use it; the relay's read and acknowledgement, which run on the
// relay's own session many times a second, are prepared once there instead
// (PlanAsTheRelay). See TestRelayReadsTheOutboxAsItIsNow.
func planNow(args ...any) []any {
	return append([]any{pgx.QueryExecModeExec}, args...)
}

// planInOrder leaves the planner no sequential scan, sort or bitmap: a
// statement that reads an index in order to a LIMIT, or finds rows by key,
// keeps that plan whatever the statistics say. Without them every outbox
// statement names a topic whose equality PostgreSQL guesses at 0.5 %, and
// takes a few rows for a bitmap and a sort of thousands. $1 is
// set_config's is_local: false for the session, true for a transaction.
const planInOrder = `SELECT set_config(s.name, 'off', $1)
	FROM unnest('{enable_bitmapscan,enable_seqscan,enable_sort}'::text[]) AS s(name)`

// relayPlanning is how the relay's session plans (PlanAsTheRelay): in
// order, as planInOrder, and with generic plans.
const relayPlanning = `SELECT set_config(s.name, s.value, $1)
	FROM unnest('{enable_bitmapscan,enable_seqscan,enable_sort,plan_cache_mode}'::text[],
		'{off,off,off,force_generic_plan}'::text[]) AS s(name, value)`

// PlanAsTheRelay sets up conn, the relay's session, so that ReadBatch and
// Ack are not planned on every round
// (docs/adr/0024-the-outbox-owns-its-table.md): pgx prepares each statement
// once per session, and its plan is generic (the topic is pruned to its
// partition when the statement runs) and kept until ForgetPlans. It can
// only be a plan that reads an index in order or finds rows by key: no
// sequential scan, no sort and no bitmap, which is what the planner would
// take for a nearly empty outbox, or for a never-analyzed one whose topic's
// selectivity it guesses. Run it on a session that runs nothing else: the
// settings stay until it closes.
func PlanAsTheRelay(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, relayPlanning, false)
	return err
}

// ForgetPlans drops the plans of conn's session; each is made again on its
// statement's next run, for the outbox as it is then. The relay calls it
// every second or so: a plan is chosen for the table's size and statistics
// of the moment, and one made on a few rows (where the primary key costs
// the same as the unacknowledged index, and may be taken) must not be kept
// while the outbox grows.
func ForgetPlans(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `DISCARD PLANS`)
	return err
}

// Row is an unacknowledged outbox row as the relay reads it. Payload is nil
// when the payload is longer than the limit asked for; Size is its length.
type Row struct {
	Offset   int64
	UUID     string
	Payload  []byte
	Metadata []byte
	Size     int64
}

// readBatchQuery is watermill-sql's queue read (unacknowledged rows in
// offset order, FOR UPDATE, $3 of the topic $1's) but for two things: a payload longer than $2,
// the producer's limit, stays in the database and only its length is read
// (such a row can never be sent; its dead letter is copied in the
// database), and the rows of a held key are left where they are.
//
// A row is held when its key has a waiting dead letter (held keys,
// docs/adr/0015-a-message-kafka-never-takes.md); the NOT EXISTS, which
// HeldCounts, Oldest and Backlog repeat word for word, probes
// dead_letters_held_keys_idx (migration 00011): with nothing held, an empty
// set.
const readBatchQuery = `SELECT "offset", uuid,
	CASE WHEN octet_length(payload::text) <= $2 THEN payload END,
	metadata, octet_length(payload::text)
FROM outbox.messages o WHERE topic = $1 AND acked = false
	AND NOT EXISTS (SELECT FROM outbox.dead_letters d
		WHERE d.topic = $1 AND d.discarded_at IS NULL AND d.metadata->>'partition_key' = o.metadata->>'partition_key')
ORDER BY "offset" ASC LIMIT $3 FOR UPDATE OF o`

// ReadBatch claims up to limit unacknowledged rows of topic whose key is not
// held, in offset order; payloads over maxPayload bytes are left unread.
// q is the relay's session (PlanAsTheRelay) or a transaction on it.
func ReadBatch(ctx context.Context, q Querier, topic string, maxPayload, limit int) ([]Row, error) {
	rows, err := q.QueryContext(ctx, readBatchQuery, topic, maxPayload, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var size sql.NullInt64
		if err := rows.Scan(&r.Offset, &r.UUID, &r.Payload, &r.Metadata, &size); err != nil {
			return nil, err
		}
		r.Size = size.Int64
		out = append(out, r)
	}
	return out, rows.Err()
}

// ackQuery is the relay's acknowledgement; its arguments are the topic and
// the offsets. It names the topic, unlike watermill-sql's, so the planner
// prunes to the topic's partition and probes its primary key only.
const ackQuery = `UPDATE outbox.messages SET acked = TRUE WHERE topic = $1 AND "offset" = ANY($2::bigint[])`

// Ack marks the rows of topic at offsets acknowledged. q is the relay's
// session (PlanAsTheRelay) or a transaction on it.
func Ack(ctx context.Context, q Querier, topic string, offsets []int64) error {
	_, err := q.ExecContext(ctx, ackQuery, topic, offsets)
	return err
}

// CopyDeadLetters copies the rows of topic at offsets, as they are, into the
// dead letters with their errors and attempts, in the order given. The copy
// is made by the database, so a row dead for its size does not travel.
func CopyDeadLetters(ctx context.Context, q Querier, topic string, offsets []int64, errs []string, attempts []int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO outbox.dead_letters (topic, message_id, outbox_offset, payload, metadata, error, attempts)
		SELECT $1, o.uuid, o."offset", o.payload, o.metadata, d.error, d.attempts
		FROM unnest($2::bigint[], $3::text[], $4::int[]) WITH ORDINALITY AS d("offset", error, attempts, n)
		JOIN outbox.messages o ON o.topic = $1 AND o."offset" = d."offset"
		ORDER BY d.n`, planNow(topic, offsets, errs, attempts)...)
	return err
}

// ListDeadLetters, DiscardDeadLetters and LockDeadLetters return the same
// columns, in this order: id, topic, message_id, outbox offset, attempts,
// error, dead_lettered_at, payload, metadata, discarded_at, discard_reason,
// key, and whether the dead letter can be replayed: an event, its message id
// and its Kafka key.

// ListDeadLetters returns the dead letters of topic (every topic when
// empty), discarded or waiting, oldest first, at most limit (0: no cap).
func ListDeadLetters(ctx context.Context, q Querier, topic string, discarded bool, limit int) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT id, topic, COALESCE(message_id, ''), outbox_offset, attempts, error,
			dead_lettered_at, COALESCE(payload, 'null'), COALESCE(metadata, 'null'), discarded_at, COALESCE(discard_reason, ''),
			COALESCE(metadata->>'partition_key', ''),
			payload IS NOT NULL AND COALESCE(message_id, '') <> '' AND COALESCE(metadata->>'partition_key', '') <> ''
		FROM outbox.dead_letters
		WHERE ($1 = '' OR topic = $1) AND (discarded_at IS NOT NULL) = $2
		ORDER BY id LIMIT NULLIF($3, 0)`, topic, discarded, limit)
}

// DiscardDeadLetters marks the waiting dead letters ids discarded with
// reason and returns them.
func DiscardDeadLetters(ctx context.Context, q Querier, ids []int64, reason string) (*sql.Rows, error) {
	return q.QueryContext(ctx, `UPDATE outbox.dead_letters SET discarded_at = now(), discard_reason = $2
		WHERE id = ANY($1) AND discarded_at IS NULL
		RETURNING id, topic, COALESCE(message_id, ''), outbox_offset, attempts, error,
			dead_lettered_at, COALESCE(payload, 'null'), COALESCE(metadata, 'null'), discarded_at, COALESCE(discard_reason, ''),
			COALESCE(metadata->>'partition_key', ''),
			payload IS NOT NULL AND COALESCE(message_id, '') <> '' AND COALESCE(metadata->>'partition_key', '') <> ''`, ids, reason)
}

// LockDeadLetters locks the waiting dead letters ids and returns them in id
// order. A concurrent replay of the same rows waits, then finds them gone.
func LockDeadLetters(ctx context.Context, q Querier, ids []int64) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT id, topic, COALESCE(message_id, ''), outbox_offset, attempts, error,
			dead_lettered_at, COALESCE(payload, 'null'), COALESCE(metadata, 'null'), discarded_at, COALESCE(discard_reason, ''),
			COALESCE(metadata->>'partition_key', ''),
			payload IS NOT NULL AND COALESCE(message_id, '') <> '' AND COALESCE(metadata->>'partition_key', '') <> ''
		FROM outbox.dead_letters WHERE id = ANY($1) AND discarded_at IS NULL ORDER BY id FOR UPDATE`, ids)
}

// Replay puts the dead letter id back into its topic's outbox at its own
// offset, unacknowledged, so that it goes before the records of its key that
// waited behind it: the row itself when the retention has not deleted it
// yet, or a new one at the same offset. Only a dead letter whose offset is
// another message's (one from before migration 00003) takes a new offset at
// the end. It deletes the dead letter and returns the row's offset.
func Replay(ctx context.Context, q Querier, id int64) (int64, error) {
	var offset int64
	err := q.QueryRowContext(ctx, `WITH dead AS (DELETE FROM outbox.dead_letters WHERE id = $1
			RETURNING topic, outbox_offset, message_id, payload, metadata),
	back AS (
		INSERT INTO outbox.messages AS o ("offset", topic, uuid, payload, metadata)
		SELECT outbox_offset, topic, message_id, payload, metadata FROM dead
		ON CONFLICT ("offset", topic) DO UPDATE SET payload = excluded.payload, metadata = excluded.metadata,
			acked = false, created_at = now()
			WHERE o.uuid = excluded.uuid
		RETURNING "offset"),
	fresh AS (
		INSERT INTO outbox.messages (topic, uuid, payload, metadata)
		SELECT topic, message_id, payload, metadata FROM dead WHERE NOT EXISTS (SELECT FROM back)
		RETURNING "offset")
	SELECT "offset" FROM back UNION ALL SELECT "offset" FROM fresh`, id).Scan(&offset)
	return offset, err
}

// Held are the held keys of a topic as HeldCounts reads them; the oldest
// fields are invalid when no key is held.
type Held struct {
	Keys, Records      int64
	OldestKey          sql.NullString
	OldestDeadLetterID sql.NullInt64
	OldestMessageID    sql.NullString
	OldestSince        sql.NullTime
	OldestAgeSeconds   sql.NullFloat64
}

// HeldCounts counts, for topic, the keys held, the records waiting behind
// them, and names the oldest held key (the one whose first waiting dead
// letter is oldest).
func HeldCounts(ctx context.Context, q Querier, topic string) (Held, error) {
	var h Held
	err := q.QueryRowContext(ctx, `WITH held AS (
			SELECT DISTINCT ON (metadata->>'partition_key') metadata->>'partition_key' AS key,
				id, COALESCE(message_id, '') AS message_id, dead_lettered_at
			FROM outbox.dead_letters
			WHERE topic = $1 AND discarded_at IS NULL AND metadata->>'partition_key' IS NOT NULL
			ORDER BY metadata->>'partition_key', id),
		oldest AS (SELECT * FROM held ORDER BY id LIMIT 1)
		SELECT (SELECT count(*) FROM held),
			(SELECT count(*) FROM outbox.messages o WHERE topic = $1 AND acked = false
				AND EXISTS (SELECT FROM outbox.dead_letters d WHERE d.topic = $1 AND d.discarded_at IS NULL
					AND d.metadata->>'partition_key' = o.metadata->>'partition_key')),
			oldest.key, oldest.id, oldest.message_id, oldest.dead_lettered_at,
			EXTRACT(EPOCH FROM now() - oldest.dead_lettered_at)::float8
		FROM (SELECT 1) AS one LEFT JOIN oldest ON true`, planNow(topic)...).
		Scan(&h.Keys, &h.Records, &h.OldestKey, &h.OldestDeadLetterID, &h.OldestMessageID, &h.OldestSince, &h.OldestAgeSeconds)
	return h, err
}

// OlderDeadLetter is the oldest waiting dead letter of topic's key older
// than the dead letter id, 0 when there is none.
func OlderDeadLetter(ctx context.Context, q Querier, topic, key string, id int64) (int64, error) {
	var older int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(min(id), 0) FROM outbox.dead_letters
		WHERE topic = $1 AND discarded_at IS NULL AND metadata->>'partition_key' = $2 AND id < $3`,
		topic, key, id).Scan(&older)
	return older, err
}

// WaitingRecords returns the first limit unacknowledged rows of topic's key:
// offset, uuid, created_at, age in seconds, and how many there are in all.
func WaitingRecords(ctx context.Context, q Querier, topic, key string, limit int) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT "offset", uuid, created_at, EXTRACT(EPOCH FROM now() - created_at)::float8, count(*) OVER ()
		FROM outbox.messages WHERE topic = $1 AND acked = false AND metadata->>'partition_key' = $2
		ORDER BY "offset" LIMIT $3`, planNow(topic, key, limit)...)
}

// Oldest is the oldest row of topic the relay may send (unacknowledged, not
// held): offset, uuid, created_at and age in seconds; sql.ErrNoRows when
// there is none.
func Oldest(ctx context.Context, q Querier, topic string) *sql.Row {
	return q.QueryRowContext(ctx, `SELECT "offset", uuid, created_at, EXTRACT(EPOCH FROM now() - created_at)::float8
		FROM outbox.messages o WHERE topic = $1 AND acked = false
			AND NOT EXISTS (SELECT FROM outbox.dead_letters d
				WHERE d.topic = $1 AND d.discarded_at IS NULL AND d.metadata->>'partition_key' = o.metadata->>'partition_key')
		ORDER BY "offset" LIMIT 1`, planNow(topic)...)
}

// Backlog counts the rows of topic the relay may send (unacknowledged, not
// held) and the age in seconds of the oldest of them, 0 when none.
func Backlog(ctx context.Context, q Querier, topic string) (n int64, ageSeconds float64, err error) {
	err = q.QueryRowContext(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
		FROM outbox.messages o WHERE topic = $1 AND acked = false
			AND NOT EXISTS (SELECT FROM outbox.dead_letters d
				WHERE d.topic = $1 AND d.discarded_at IS NULL AND d.metadata->>'partition_key' = o.metadata->>'partition_key')`,
		planNow(topic)...).Scan(&n, &ageSeconds)
	return n, ageSeconds, err
}

// DeadLetterCounts counts topic's dead letters, waiting and discarded.
func DeadLetterCounts(ctx context.Context, q Querier, topic string) (waiting, discarded int64, err error) {
	err = q.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE discarded_at IS NULL), count(*) FILTER (WHERE discarded_at IS NOT NULL)
		FROM outbox.dead_letters WHERE topic = $1`, topic).Scan(&waiting, &discarded)
	return waiting, discarded, err
}

// deleteAckedQuery is the retention's delete: up to $3 acknowledged rows of
// the topic $1 older than $2 seconds, oldest first, found through the
// acknowledged rows' index by their age.
const deleteAckedQuery = `DELETE FROM outbox.messages
	WHERE topic = $1 AND "offset" IN (
		SELECT "offset" FROM outbox.messages
		WHERE topic = $1 AND acked AND created_at < now() - make_interval(secs => $2)
		ORDER BY created_at
		LIMIT $3)`

// DeleteAcked deletes up to limit acknowledged rows of topic older than
// olderThanSeconds, oldest first, and returns how many it deleted. It plans
// in order (planInOrder) in a transaction of its own: never analyzed, a
// batch would otherwise gather every expired row as a bitmap and sort them
// (TestRetentionDeletePlanWithoutJIT).
func DeleteAcked(ctx context.Context, db *sql.DB, topic string, olderThanSeconds float64, limit int) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // after a commit, a no-op
	if _, err := tx.ExecContext(ctx, planInOrder, true); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, deleteAckedQuery, planNow(topic, olderThanSeconds, limit)...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// EnsureTopics makes each topic's table in outbox.messages, from the one
// definition (outbox.create_topic), unless it has one. A bad topic, or one
// whose table name is another's, is refused and nothing is made.
func EnsureTopics(ctx context.Context, q Querier, topics []string) error {
	_, err := q.ExecContext(ctx, `SELECT outbox.create_topic(t) FROM unnest($1::text[]) AS t`, topics)
	if err != nil {
		return fmt.Errorf("outbox: create the topics' tables: %w", err)
	}
	return nil
}

// ErrNoTopicTable is wrapped by CheckTopics when a topic has no table.
var ErrNoTopicTable = errors.New("no outbox table; `pin migrate up` makes the tables of the topics the modules declare")

// CheckTopics returns an error naming every topic of topics with no table
// in outbox.messages.
func CheckTopics(ctx context.Context, q Querier, topics []string) error {
	rows, err := q.QueryContext(ctx, `SELECT t FROM unnest($1::text[]) AS t
		WHERE NOT EXISTS (SELECT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'outbox.messages'::regclass
				AND pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%L)', t))
		ORDER BY t`, topics)
	if err != nil {
		return fmt.Errorf("outbox: check the topics' tables: %w", err)
	}
	defer rows.Close()
	var missing []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return fmt.Errorf("outbox: check the topics' tables: %w", err)
		}
		missing = append(missing, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("outbox: check the topics' tables: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("outbox: topic %s: %w", strings.Join(missing, ", "), ErrNoTopicTable)
	}
	return nil
}

// OutboxRow names a row of a topic's outbox, as status and the dead-letter
// list show it.
type OutboxRow struct {
	Offset     int64     `json:"offset"`
	MessageID  string    `json:"messageId"`
	CreatedAt  time.Time `json:"createdAt"`
	AgeSeconds float64   `json:"ageSeconds"`
}
