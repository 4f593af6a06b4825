package consumer

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pinmarket/pin/platform/postgres"
)

// GroupStatus is one consumer's state as the database knows it, for `pin
// status`. Its lag is the broker's to say (committed offsets against the
// topic's end), not the database's.
type GroupStatus struct {
	Group string `json:"group"`
	// DeadLetters waiting for an operator, and those discarded.
	DeadLetters          int64 `json:"deadLetters"`
	DiscardedDeadLetters int64 `json:"discardedDeadLetters"`
	// LastReceivedAt is when the consumer last took a new message (its
	// newest inbox entry); null when the inbox holds none.
	LastReceivedAt *time.Time `json:"lastReceivedAt"`
}

// ReadStatus returns the state of each consumer of groups, and of any other
// consumer that has dead letters, by name.
func ReadStatus(ctx context.Context, db postgres.Querier, groups []string) ([]GroupStatus, error) {
	rows, err := db.QueryContext(ctx, `SELECT g.consumer,
			(SELECT count(*) FROM consumer.dead_letters d WHERE d.consumer = g.consumer AND d.`+waiting+`),
			(SELECT count(*) FROM consumer.dead_letters d WHERE d.consumer = g.consumer AND NOT d.`+waiting+`),
			(SELECT max(received_at) FROM consumer.inbox i WHERE i.consumer = g.consumer)
		FROM (SELECT unnest($1::text[]) AS consumer UNION SELECT DISTINCT consumer FROM consumer.dead_letters) g
		ORDER BY g.consumer`, pgtype.FlatArray[string](groups))
	if err != nil {
		return nil, fmt.Errorf("consumer: status: %w", err)
	}
	return postgres.CollectRows(rows, "consumer: status", func(r *sql.Rows) (GroupStatus, error) {
		var s GroupStatus
		var last sql.NullTime
		if err := r.Scan(&s.Group, &s.DeadLetters, &s.DiscardedDeadLetters, &last); err != nil {
			return GroupStatus{}, err
		}
		if last.Valid {
			t := last.Time.UTC()
			s.LastReceivedAt = &t
		}
		return s, nil
	})
}

// NotConsumingAfter is how long a record may wait for a consumer, which
// takes one in milliseconds, with no new message taken meanwhile, before
// `pin status` says the consumer is not consuming.
const NotConsumingAfter = time.Minute

// NotConsuming reports whether the consumer is not consuming while its lag
// grows (ADR 0020): the oldest record waiting for it was written
// NotConsumingAfter before asOf or earlier, and it took no new message
// since. One catching up on an old backlog is taking new messages; an idle
// one has nothing waiting.
func (s GroupStatus) NotConsuming(oldestWaitingAt *time.Time, asOf time.Time) bool {
	if oldestWaitingAt == nil || asOf.Sub(*oldestWaitingAt) < NotConsumingAfter {
		return false
	}
	return s.LastReceivedAt == nil || asOf.Sub(*s.LastReceivedAt) >= NotConsumingAfter
}
