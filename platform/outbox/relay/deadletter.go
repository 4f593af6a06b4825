package relay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// deadLetter is an outbox row the relay gives up on, with the last error
// and why it can never be sent (ReasonTooLarge, ReasonInvalid).
type deadLetter struct {
	row      outboxRow
	err      error
	attempts int
	reason   string
}

// insertDeadLetters copies the rows of dead, as they are in topic's outbox
// table, into the dead-letter table in the relay's transaction, in the
// order of dead: the copies and the rows' acknowledgement commit together.
// The copy is made by the database, so a row that is dead for its size
// does not travel back. Each error starts with its reason ("too_large: …"),
// which operators and the runbook read.
func insertDeadLetters(ctx context.Context, tx *sql.Tx, topic string, dead []deadLetter) error {
	offsets, errs, attempts := make([]int64, len(dead)), make([]string, len(dead)), make([]int64, len(dead))
	for i, d := range dead {
		offsets[i], errs[i], attempts[i] = d.row.offset, d.reason+": "+d.err.Error(), int64(d.attempts)
	}
	err := store.CopyDeadLetters(ctx, tx, topic, offsets, errs, attempts)
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	return nil
}
