package outbox

import (
	"context"
	"database/sql"
	"fmt"
)

// deadLetter is an outbox row the relay gives up on, with the last error.
type deadLetter struct {
	row      outboxRow
	err      error
	attempts int
}

// insertDeadLetter copies d's row, as it is, into the dead-letter table in
// the relay's transaction: the copy and the row's acknowledgement commit
// together.
func insertDeadLetter(ctx context.Context, tx *sql.Tx, topic string, d deadLetter) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO `+DeadLetterTable+` (topic, message_id, outbox_offset, payload, metadata, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		topic, d.row.msg.UUID, d.row.offset, []byte(d.row.msg.Payload), d.row.metadata, d.err.Error(), d.attempts)
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	return nil
}
