// Package deadletter is what the outbox's and the consumer kit's dead letters
// share: the fields every dead letter shows an operator (Letter), how a list
// is narrowed (Filter), the errors the commands report, and the one
// administration both sides run: a discard and a replay that are all or
// nothing, and a replay of every waiting one that reports the ones it could
// not. Each side keeps its own table and statements (its internal store)
// and says, through a Table, what its statements are and what replaying one
// dead letter does: back into the outbox, or to its consumer's handler.
// See docs/adr/0029-the-consumer-kit-in-rooms.md.
package deadletter

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pinmarket/pin/platform/postgres"
)

// Ref names a dead letter and the message it keeps.
type Ref struct {
	ID    int64  `json:"id"`
	Topic string `json:"topic"`
	// MessageID is the message's id (the message_id header); empty only
	// when the dead letter does not hold one.
	MessageID string `json:"messageId"`
}

// Letter is what every dead letter says, whichever side gave it up. A
// side's dead letter embeds it and adds what only it knows (the outbox's
// offset and key, the consumer's partition and record bytes).
type Letter struct {
	Ref
	Attempts       int       `json:"attempts"`
	Error          string    `json:"error"`
	DeadLetteredAt time.Time `json:"deadLetteredAt"`
	// DiscardedAt and DiscardReason are set on a discarded dead letter
	// (Discard): kept for the record, never replayed.
	DiscardedAt   *time.Time `json:"discardedAt,omitempty"`
	DiscardReason string     `json:"discardReason,omitempty"`
}

func (l Letter) letter() Letter { return l }

// Entry is a side's dead letter: a struct that embeds Letter.
type Entry interface{ letter() Letter }

// Filter says which dead letters a list returns.
type Filter struct {
	// Of keeps the dead letters of one topic (the outbox's) or of one
	// consumer (the consumer kit's); all when empty.
	Of string
	// Limit caps how many, oldest first; no cap when 0.
	Limit int
	// Discarded lists the discarded ones instead of those waiting.
	Discarded bool
}

// FailedReplay is a dead letter ReplayAll could not replay, and why; it
// stays where it was.
type FailedReplay struct {
	Ref
	Reason string `json:"reason"`
}

// ErrNotFound is wrapped when a named dead letter does not exist or is not
// waiting: it never did, or was replayed or discarded already.
var ErrNotFound = errors.New("no such dead letter")

// ErrNotReplayable is wrapped when a named dead letter lacks what its
// replay needs (the outbox's: an event, a message id and a key; the
// consumer's: the record's bytes).
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// Table is one side's dead letters as the administration changes them:
// the statements of the side's store, how a row of theirs is read, and
// what a replay of one does. Every method runs in the transaction it is
// given.
type Table[D Entry, R any] interface {
	// Discard marks the waiting dead letters of ids discarded with reason
	// and returns their rows.
	Discard(ctx context.Context, tx *sql.Tx, ids []int64, reason string) (*sql.Rows, error)
	// Lock locks the waiting dead letters of ids and returns their rows in
	// id order; a concurrent replay of the same rows waits, then finds them
	// gone.
	Lock(ctx context.Context, tx *sql.Tx, ids []int64) (*sql.Rows, error)
	// Scan reads a row of Discard's or Lock's.
	Scan(rows *sql.Rows) (D, error)
	// Replay hands d back (to the outbox, to its consumer) and deletes it;
	// an error wrapping ErrNotReplayable when it cannot be.
	Replay(ctx context.Context, tx *sql.Tx, d D) (R, error)
}

// Discard marks the named dead letters discarded, with reason, in one
// transaction, and returns them in id order: they leave the list and every
// replay, and stay for `list --discarded`. It is all or nothing: when one of
// ids is not waiting, nothing changes (ErrNotFound). side names the dead
// letters in errors ("outbox", "consumer").
func Discard[D Entry, R any](ctx context.Context, db *sql.DB, t Table[D, R], side string, ids []int64, reason string) ([]D, error) {
	what := side + ": discard dead letters"
	if len(ids) == 0 || strings.TrimSpace(reason) == "" {
		return nil, errors.New(what + ": ids and a reason are required")
	}
	var out []D
	err := postgres.InSQLTx(ctx, db, what, func(tx *sql.Tx) error {
		rows, err := t.Discard(ctx, tx, ids, reason)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if out, err = postgres.CollectRows(rows, what, t.Scan); err != nil {
			return err
		}
		return requireAll(ids, out)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b D) int { return cmp.Compare(a.letter().ID, b.letter().ID) })
	return out, nil
}

// Replay hands the named dead letters back in id order, the order they
// were dead-lettered, in one transaction. It is all or nothing: when one of
// ids is not waiting (ErrNotFound; a second replay of the same id is that
// case) or cannot be replayed, nothing changes.
func Replay[D Entry, R any](ctx context.Context, db *sql.DB, t Table[D, R], side string, ids []int64) ([]R, error) {
	if len(ids) == 0 {
		return nil, errors.New(side + ": replay dead letters: no ids")
	}
	return replay(ctx, db, t, side, ids, true)
}

// ReplayAll replays each of waiting (a side's list of its waiting dead
// letters) in a transaction of its own, in their order: one that cannot be
// replayed is returned in failed with the reason and stays, and the others
// are replayed all the same. One replayed or discarded meanwhile by someone
// else is neither.
func ReplayAll[D Entry, R any](ctx context.Context, db *sql.DB, t Table[D, R], side string, waiting []D) (replayed []R, failed []FailedReplay) {
	for _, d := range waiting {
		ref := d.letter().Ref
		r, err := replay(ctx, db, t, side, []int64{ref.ID}, false)
		switch {
		case err != nil:
			failed = append(failed, FailedReplay{Ref: ref, Reason: err.Error()})
		case len(r) == 1:
			replayed = append(replayed, r[0])
		}
	}
	return replayed, failed
}

// replay locks the waiting dead letters of ids and replays them in one
// transaction; all requires every one of ids to be found.
func replay[D Entry, R any](ctx context.Context, db *sql.DB, t Table[D, R], side string, ids []int64, all bool) ([]R, error) {
	what := side + ": replay dead letters"
	var out []R
	err := postgres.InSQLTx(ctx, db, what, func(tx *sql.Tx) error {
		rows, err := t.Lock(ctx, tx, ids)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		found, err := postgres.CollectRows(rows, what, t.Scan)
		if err != nil {
			return err
		}
		if all {
			if err := requireAll(ids, found); err != nil {
				return err
			}
		}
		out = make([]R, 0, len(found))
		for _, d := range found {
			r, err := t.Replay(ctx, tx, d)
			if err != nil {
				return fmt.Errorf("%s: dead letter %d: %w (nothing replayed)", what, d.letter().ID, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// requireAll fails with ErrNotFound, naming them, when some of ids are not
// among found.
func requireAll[D Entry](ids []int64, found []D) error {
	if missing := postgres.Missing(ids, found, func(d D) int64 { return d.letter().ID }); len(missing) > 0 {
		return fmt.Errorf("%w: %s (never existed, or already replayed or discarded)", ErrNotFound, strings.Join(missing, ", "))
	}
	return nil
}
