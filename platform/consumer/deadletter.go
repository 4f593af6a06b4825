package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// deadLetter keeps the record in consumer.dead_letters and counts it; a
// record re-delivered after a crash is kept once. The key, the value and the
// header list go in as bytes, so no content can make PostgreSQL refuse them;
// should the row still be refused for its data (SQLSTATE class 22), a
// minimal dead letter saying where the record is takes its place. An error
// is a database fault, and the caller must not mark the record.
func (r *Runner[B]) deadLetter(ctx context.Context, rec Record, cause error, attempts int) error {
	ctx = context.WithoutCancel(ctx)
	err := r.insertDeadLetter(ctx, rec, cause, attempts)
	if code := dataExceptionCode(err); code != "" {
		r.logger.ErrorContext(ctx, "dead letter refused for its data; keeping a minimal one", "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "sqlstate", code, "error", err)
		err = r.insertMinimalDeadLetter(ctx, rec, code, attempts)
	}
	if err != nil {
		return fmt.Errorf("dead letter of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	r.logger.ErrorContext(ctx, "record dead-lettered", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
		"key", string(rec.Key), "attempts", attempts, "error", cause)
	r.count(ctx, outcomeDeadLettered, Event[B]{})
	return nil
}

// insertDeadLetter writes the whole record: bytes in the bytea columns, and
// the readable forms (headers as jsonb, the error as text) with NUL and
// invalid UTF-8 escaped.
func (r *Runner[B]) insertDeadLetter(ctx context.Context, rec Record, cause error, attempts int) error {
	headers, err := readableHeaders(rec.Headers)
	if err != nil {
		return err
	}
	keys, values := make([][]byte, len(rec.HeaderList)), make([][]byte, len(rec.HeaderList))
	for i, h := range rec.HeaderList {
		keys[i], values[i] = h.Key, h.Value
	}
	// Through the connection, not GORM, which would expand the arrays.
	_, err = r.db.Statement.ConnPool.ExecContext(ctx, `
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, record_key, headers,
			header_keys, header_values, value, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT ON CONSTRAINT dead_letters_record_key DO NOTHING`,
		r.cfg.Name, rec.Topic, rec.Partition, rec.Offset, rec.Key, headers, keys, values, rec.Value,
		readable(cause.Error()), attempts)
	return err
}

// insertMinimalDeadLetter writes where the record is and the SQLSTATE the
// whole row was refused with, and nothing taken from the record's content.
func (r *Runner[B]) insertMinimalDeadLetter(ctx context.Context, rec Record, refused string, attempts int) error {
	_, err := r.db.Statement.ConnPool.ExecContext(ctx, `
		INSERT INTO consumer.dead_letters (consumer, topic, kafka_partition, kafka_offset, error, attempts, refused_sqlstate)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT ON CONSTRAINT dead_letters_record_key DO NOTHING`,
		r.cfg.Name, readable(rec.Topic), rec.Partition, rec.Offset,
		fmt.Sprintf("the dead letter was refused for its data (SQLSTATE %s); the record is only in the topic", refused),
		attempts, refused)
	return err
}

// dataExceptionCode is the SQLSTATE of err when it is of class 22 (data
// exception): PostgreSQL refused the values, not the statement.
func dataExceptionCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return pgErr.Code
	}
	return ""
}

// readableHeaders is the jsonb form of the headers, for reading and
// searching; the exact bytes are in header_keys and header_values.
func readableHeaders(headers map[string]string) (string, error) {
	out := make(map[string]string, len(headers))
	for k, v := range headers {
		out[readable(k)] = readable(v)
	}
	js, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("dead letter headers: %w", err)
	}
	return string(js), nil
}

// readable is s as PostgreSQL text and jsonb accept it: a NUL and each byte
// that is not UTF-8 are written \xNN, the rest is left as it is.
func readable(s string) string {
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
