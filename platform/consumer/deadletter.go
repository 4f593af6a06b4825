package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pinmarket/pin/platform/consumer/internal/store"
)

// deadLetter keeps the record in consumer.dead_letters and counts it; a
// record re-delivered after a crash is kept once. The key, the value and the
// header list go in as bytes, so no content can make PostgreSQL refuse them;
// should the row still be refused for its data (SQLSTATE class 22), a
// minimal dead letter saying where the record is takes its place. An error
// is a database fault, and the caller must not mark the record.
func (r *Runner[B]) deadLetter(ctx context.Context, rec Record, cause error, attempts int) error {
	ctx = context.WithoutCancel(ctx)
	d := toStoredDeadLetter(r.cfg.Name, rec, cause, attempts)
	// Through the connection, not GORM, which would expand the arrays.
	err := store.InsertDeadLetter(ctx, r.db.Statement.ConnPool, d)
	if code := dataExceptionCode(err); code != "" {
		r.logger.ErrorContext(ctx, "dead letter refused for its data; keeping a minimal one", "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "sqlstate", code, "error", err)
		err = store.InsertMinimalDeadLetter(ctx, r.db.Statement.ConnPool, d, code)
	}
	if err != nil {
		return fmt.Errorf("dead letter of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	r.logger.ErrorContext(ctx, "record dead-lettered", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
		"key", string(rec.Key), "attempts", attempts, "error", cause)
	r.count(ctx, outcomeDeadLettered, Event[B]{})
	return nil
}

// toStoredDeadLetter is rec as the store keeps it, given up on for cause
// after attempts.
func toStoredDeadLetter(consumer string, rec Record, cause error, attempts int) store.DeadLetter {
	keys, values := make([][]byte, len(rec.HeaderList)), make([][]byte, len(rec.HeaderList))
	for i, h := range rec.HeaderList {
		keys[i], values[i] = h.Key, h.Value
	}
	return store.DeadLetter{Consumer: consumer, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Key: rec.Key, Headers: rec.Headers, HeaderKeys: keys, HeaderValues: values, Value: rec.Value,
		Error: cause.Error(), Attempts: attempts}
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
