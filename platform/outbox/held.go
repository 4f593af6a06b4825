package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A held key: while a record of a key waits in the dead letters (neither
// replayed nor discarded), the relay sends none of the key's later records,
// so each key's records reach Kafka in outbox order, always. The state is
// the dead-letter table itself, so every relay instance and every operator
// command sees the same. See docs/adr/0015-a-message-kafka-never-takes.md,
// decision 8.

// heldRow holds for an outbox row o of the topic $1 whose key has a waiting
// dead letter. It probes dead_letters_held_keys_idx (migration 00011): with
// nothing held, an empty set.
const heldRow = `EXISTS (SELECT FROM ` + DeadLetterTable + ` d
	WHERE d.topic = $1 AND d.discarded_at IS NULL
		AND d.metadata->>'partition_key' = o.metadata->>'partition_key')`

// heldQuery counts, for the topic $1 with the outbox table %s, the keys
// held, the records waiting behind them, and names the oldest held key
// (the one whose first waiting dead letter is oldest).
const heldQuery = `WITH held AS (
		SELECT DISTINCT ON (metadata->>'partition_key') metadata->>'partition_key' AS key,
			id, COALESCE(message_id, '') AS message_id, dead_lettered_at
		FROM ` + DeadLetterTable + `
		WHERE topic = $1 AND discarded_at IS NULL AND metadata->>'partition_key' IS NOT NULL
		ORDER BY metadata->>'partition_key', id),
	oldest AS (SELECT * FROM held ORDER BY id LIMIT 1)
	SELECT (SELECT count(*) FROM held),
		(SELECT count(*) FROM %s o WHERE acked = false AND ` + heldRow + `),
		oldest.key, oldest.id, oldest.message_id, oldest.dead_lettered_at,
		EXTRACT(EPOCH FROM now() - oldest.dead_lettered_at)::float8
	FROM (SELECT 1) AS one LEFT JOIN oldest ON true`

// HeldKeys says which records of a topic wait behind a dead letter of their
// key: the relay sends them once it is replayed or discarded.
type HeldKeys struct {
	// Keys is how many keys have a dead letter waiting.
	Keys int64 `json:"keys"`
	// Records is how many outbox rows wait behind them.
	Records int64 `json:"records"`
	// Oldest is the key held longest; null when none is.
	Oldest *HeldKey `json:"oldest"`
}

// HeldKey is a key held by a dead letter, and since when.
type HeldKey struct {
	Key string `json:"key"`
	// DeadLetterID is the dead letter that holds it: replay or discard it.
	DeadLetterID int64     `json:"deadLetterId"`
	MessageID    string    `json:"messageId"`
	Since        time.Time `json:"since"`
	AgeSeconds   float64   `json:"ageSeconds"`
}

// readHeld reads the held keys of topic.
func readHeld(ctx context.Context, db *sql.DB, topic string) (HeldKeys, error) {
	var h HeldKeys
	var k HeldKey
	var key, messageID sql.NullString
	var id sql.NullInt64
	var since sql.NullTime
	var age sql.NullFloat64
	err := db.QueryRowContext(ctx, fmt.Sprintf(heldQuery, TableName(topic)), planNow([]any{topic})...).
		Scan(&h.Keys, &h.Records, &key, &id, &messageID, &since, &age)
	if err != nil {
		return HeldKeys{}, fmt.Errorf("outbox: held keys of %s: %w", topic, err)
	}
	if id.Valid {
		k.Key, k.DeadLetterID, k.MessageID, k.Since, k.AgeSeconds = key.String, id.Int64, messageID.String, since.Time.UTC(), max(age.Float64, 0)
		h.Oldest = &k
	}
	return h, nil
}

// firstWaiting is how many waiting records a listed dead letter names.
const firstWaiting = 10

// readWaiting sets what waits behind d, a waiting dead letter: the older
// dead letter of its key it waits behind, or the key's outbox records that
// wait behind it.
func readWaiting(ctx context.Context, db *sql.DB, d *DeadLetter) error {
	if d.Key == "" || checkTopic(d.Topic) != nil {
		return nil // holds nothing; a topic of no outbox table has no records
	}
	err := db.QueryRowContext(ctx, `SELECT COALESCE(min(id), 0) FROM `+DeadLetterTable+`
		WHERE topic = $1 AND discarded_at IS NULL AND metadata->>'partition_key' = $2 AND id < $3`,
		d.Topic, d.Key, d.ID).Scan(&d.WaitsBehind)
	if err != nil || d.WaitsBehind != 0 {
		return wrapWaiting(d, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT "offset", uuid, created_at, EXTRACT(EPOCH FROM now() - created_at)::float8, count(*) OVER ()
		FROM `+TableName(d.Topic)+` WHERE acked = false AND metadata->>'partition_key' = $1
		ORDER BY "offset" LIMIT $2`, d.Key, firstWaiting)
	if err != nil {
		return wrapWaiting(d, err)
	}
	defer rows.Close()
	for rows.Next() {
		var o OutboxRow
		if err := rows.Scan(&o.Offset, &o.MessageID, &o.CreatedAt, &o.AgeSeconds, &d.WaitingRecords); err != nil {
			return wrapWaiting(d, err)
		}
		o.CreatedAt = o.CreatedAt.UTC()
		d.FirstWaiting = append(d.FirstWaiting, o)
	}
	return wrapWaiting(d, rows.Err())
}

func wrapWaiting(d *DeadLetter, err error) error {
	if err != nil {
		return fmt.Errorf("outbox: records waiting behind dead letter %d: %w", d.ID, err)
	}
	return nil
}
