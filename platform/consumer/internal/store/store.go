// Package store is the one place that knows the layout of the consumer
// kit's tables (consumer.inbox, consumer.aggregate_versions,
// consumer.dead_letters; migrations 00004, 00006, 00009): every statement
// on them is here, each one literal and whole, with values as $n
// parameters. The runner, the inbox and the dead-letter commands call its
// functions; being internal to platform/consumer, modules cannot.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is a session, a pool or a transaction (a *sql.Tx, or GORM's
// connection inside one).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// guardQuery is Guard's statement: $1 the message ids, $2 their aggregate
// ids, $3 the consumer. The version rows are locked in aggregate order, so
// that two batches do not deadlock on them.
const guardQuery = `
		WITH input AS (
			SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(message_id, aggregate_id)),
		fresh AS (
			INSERT INTO consumer.inbox (consumer, message_id)
			SELECT $3, message_id FROM input
			ON CONFLICT DO NOTHING RETURNING message_id),
		locked AS (
			INSERT INTO consumer.aggregate_versions AS v (consumer, aggregate_id, version)
			SELECT DISTINCT $3, i.aggregate_id, 0::bigint FROM input i JOIN fresh USING (message_id) ORDER BY 2
			ON CONFLICT (consumer, aggregate_id) DO UPDATE SET version = v.version
			RETURNING aggregate_id, version)
		SELECT message_id::text, NULL, NULL::bigint FROM fresh
		UNION ALL
		SELECT NULL, aggregate_id, version FROM locked`

// Guard records messageIDs in consumer's inbox and, for the aggregates of
// the new ones (aggregateIDs[i] is messageIDs[i]'s), locks their version
// rows, creating them at 0, in one statement. It returns the message ids
// that were new and the last version applied per aggregate.
func Guard(ctx context.Context, q Querier, consumer string, messageIDs, aggregateIDs []string) (fresh map[string]bool, last map[string]int64, err error) {
	rows, err := q.QueryContext(ctx, guardQuery, messageIDs, aggregateIDs, consumer)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = rows.Close() }()
	fresh, last = make(map[string]bool), make(map[string]int64)
	for rows.Next() {
		var messageID, aggregateID sql.NullString
		var version sql.NullInt64
		if err := rows.Scan(&messageID, &aggregateID, &version); err != nil {
			return nil, nil, err
		}
		if messageID.Valid {
			fresh[messageID.String] = true
		} else {
			last[aggregateID.String] = version.Int64
		}
	}
	return fresh, last, rows.Err()
}

// recordVersionsQuery records the last version applied per aggregate: $1
// the aggregate ids, $2 their versions, $3 the consumer.
const recordVersionsQuery = `
	UPDATE consumer.aggregate_versions v SET version = u.version, applied_at = now()
	FROM unnest($1::text[], $2::bigint[]) AS u(aggregate_id, version)
	WHERE v.consumer = $3 AND v.aggregate_id = u.aggregate_id`

// RecordVersions sets the last version applied of each aggregate of
// aggregateIDs to versions[i]; Guard locked their rows.
func RecordVersions(ctx context.Context, q Querier, consumer string, aggregateIDs []string, versions []int64) error {
	_, err := q.ExecContext(ctx, recordVersionsQuery, aggregateIDs, versions, consumer)
	return err
}

// DeleteOldInbox deletes up to limit of consumer's inbox entries received
// more than olderThanSeconds ago and returns how many it deleted.
func DeleteOldInbox(ctx context.Context, q Querier, consumer string, olderThanSeconds float64, limit int) (int64, error) {
	res, err := q.ExecContext(ctx, `
		DELETE FROM consumer.inbox WHERE consumer = $1 AND message_id IN (
			SELECT message_id FROM consumer.inbox
			WHERE consumer = $1 AND received_at < now() - make_interval(secs => $2)
			LIMIT $3)`, consumer, olderThanSeconds, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// DeadLetter is a record a consumer gives up on, as InsertDeadLetter keeps
// it: where it was, its bytes, and why.
type DeadLetter struct {
	Consumer  string
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	// Headers are the record's headers by name, for the readable column;
	// HeaderKeys and HeaderValues are all of them as they came, in order.
	Headers      map[string]string
	HeaderKeys   [][]byte
	HeaderValues [][]byte
	Value        []byte
	Error        string
	Attempts     int
}

// InsertDeadLetter keeps d, once: a record re-delivered after a crash is
// not kept twice. The record's bytes go in bytea columns, so no content can
// make PostgreSQL refuse them; the readable columns (headers as jsonb, the
// error as text) are written with NUL and invalid UTF-8 escaped (Readable).
func InsertDeadLetter(ctx context.Context, q Querier, d DeadLetter) error {
	readableHeaders := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		readableHeaders[Readable(k)] = Readable(v)
	}
	headers, err := json.Marshal(readableHeaders)
	if err != nil {
		return fmt.Errorf("dead letter headers: %w", err)
	}
	_, err = q.ExecContext(ctx, `
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, record_key, headers,
			header_keys, header_values, value, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT ON CONSTRAINT dead_letters_record_key DO NOTHING`,
		d.Consumer, d.Topic, d.Partition, d.Offset, d.Key, string(headers), d.HeaderKeys, d.HeaderValues, d.Value,
		Readable(d.Error), d.Attempts)
	return err
}

// InsertMinimalDeadLetter keeps where d's record is, the SQLSTATE refused
// with which the whole row was refused, and nothing taken from the
// record's content.
func InsertMinimalDeadLetter(ctx context.Context, q Querier, d DeadLetter, refused string) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, error, attempts, refused_sqlstate)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT ON CONSTRAINT dead_letters_record_key DO NOTHING`,
		d.Consumer, Readable(d.Topic), d.Partition, d.Offset,
		fmt.Sprintf("the dead letter was refused for its data (SQLSTATE %s); the record is only in the topic", refused),
		d.Attempts, refused)
	return err
}

// ListDeadLetters, DiscardDeadLetters and LockDeadLetters return the same
// columns, in this order: id, consumer, topic, partition, offset, key,
// value, header keys, header values, error, attempts, dead_lettered_at,
// refused SQLSTATE ('' for a whole one), whether it kept the record's bytes
// (every row but a minimal one), discarded_at, discard reason.

// ListDeadLetters returns the dead letters of consumer (of every consumer
// when empty), discarded or waiting, oldest first, at most limit (0: no
// cap).
func ListDeadLetters(ctx context.Context, q Querier, consumer string, discarded bool, limit int) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT id, consumer, topic, kafka_partition, kafka_offset, record_key, value,
			header_keys, header_values, error, attempts, dead_lettered_at, COALESCE(refused_sqlstate, ''),
			refused_sqlstate IS NULL AND header_keys IS NOT NULL, discarded_at, COALESCE(discard_reason, '')
		FROM consumer.dead_letters
		WHERE ($1 = '' OR consumer = $1) AND (discarded_at IS NOT NULL) = $2
		ORDER BY id LIMIT NULLIF($3, 0)`, consumer, discarded, limit)
}

// DiscardDeadLetters marks the waiting dead letters ids discarded with
// reason and returns them.
func DiscardDeadLetters(ctx context.Context, q Querier, ids []int64, reason string) (*sql.Rows, error) {
	return q.QueryContext(ctx, `UPDATE consumer.dead_letters SET discarded_at = now(), discard_reason = $2
		WHERE id = ANY($1) AND discarded_at IS NULL
		RETURNING id, consumer, topic, kafka_partition, kafka_offset, record_key, value,
			header_keys, header_values, error, attempts, dead_lettered_at, COALESCE(refused_sqlstate, ''),
			refused_sqlstate IS NULL AND header_keys IS NOT NULL, discarded_at, COALESCE(discard_reason, '')`, ids, reason)
}

// LockDeadLetters locks the waiting dead letters ids and returns them in id
// order. A concurrent replay of the same rows waits, then finds them gone.
func LockDeadLetters(ctx context.Context, q Querier, ids []int64) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT id, consumer, topic, kafka_partition, kafka_offset, record_key, value,
			header_keys, header_values, error, attempts, dead_lettered_at, COALESCE(refused_sqlstate, ''),
			refused_sqlstate IS NULL AND header_keys IS NOT NULL, discarded_at, COALESCE(discard_reason, '')
		FROM consumer.dead_letters WHERE id = ANY($1) AND discarded_at IS NULL ORDER BY id FOR UPDATE`, ids)
}

// DeleteDeadLetter deletes the dead letter id: it was replayed.
func DeleteDeadLetter(ctx context.Context, q Querier, id int64) error {
	_, err := q.ExecContext(ctx, `DELETE FROM consumer.dead_letters WHERE id = $1`, id)
	return err
}

// Status returns, for each consumer of groups and any other that has dead
// letters, by name: its waiting and discarded dead letters and its newest
// inbox entry's time (NULL when none).
func Status(ctx context.Context, q Querier, groups []string) (*sql.Rows, error) {
	return q.QueryContext(ctx, `SELECT g.consumer,
			(SELECT count(*) FROM consumer.dead_letters d WHERE d.consumer = g.consumer AND d.discarded_at IS NULL),
			(SELECT count(*) FROM consumer.dead_letters d WHERE d.consumer = g.consumer AND d.discarded_at IS NOT NULL),
			(SELECT max(received_at) FROM consumer.inbox i WHERE i.consumer = g.consumer)
		FROM (SELECT unnest($1::text[]) AS consumer UNION SELECT DISTINCT consumer FROM consumer.dead_letters) g
		ORDER BY g.consumer`, pgtype.FlatArray[string](groups))
}

// Readable is s as PostgreSQL text and jsonb accept it: a NUL and each byte
// that is not UTF-8 are written \xNN, the rest is left as it is.
func Readable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == 0 || (c == utf8.RuneError && size == 1) {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
