package deadletters

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
	"github.com/pinmarket/pin/platform/postgres"
)

// DeadLetter is one message the relay gave up on, as an operator lists it
// (`pin outbox dead-letters list`): a row of outbox.dead_letters, with the
// event and its Kafka metadata as they were in the outbox.
type DeadLetter struct {
	ID    int64  `json:"id"`
	Topic string `json:"topic"`
	// MessageID is empty only for a row whose envelope could not be read.
	MessageID      string          `json:"messageId"`
	OutboxOffset   int64           `json:"outboxOffset"`
	Attempts       int             `json:"attempts"`
	Error          string          `json:"error"`
	DeadLetteredAt time.Time       `json:"deadLetteredAt"`
	Payload        json.RawMessage `json:"payload"`
	Metadata       json.RawMessage `json:"metadata"`
	// DiscardedAt and DiscardReason are set on a discarded dead letter
	// (Discard): kept for the record, never replayed.
	DiscardedAt   *time.Time `json:"discardedAt,omitempty"`
	DiscardReason string     `json:"discardReason,omitempty"`
	// Key is the event's Kafka key: while the dead letter waits, the relay
	// sends no later record of that key (held.go).
	Key string `json:"key,omitempty"`
	// WaitsBehind is the older waiting dead letter of the same key, when
	// there is one: this one goes only after it.
	WaitsBehind int64 `json:"waitsBehind,omitempty"`
	// WaitingRecords counts the outbox records of the key that wait behind
	// the key's oldest waiting dead letter, and FirstWaiting names the
	// first of them; both are set on that dead letter only.
	WaitingRecords int64       `json:"waitingRecords"`
	FirstWaiting   []OutboxRow `json:"firstWaiting,omitempty"`
}

// ListFilter says which dead letters List returns.
type ListFilter struct {
	// Topic keeps those of one Kafka topic; all topics when empty.
	Topic string
	// Limit caps how many, oldest first; no cap when 0.
	Limit int
	// Discarded lists the discarded ones instead of those waiting.
	Discarded bool
}

// FailedReplay is a dead letter ReplayAll could not replay, and
// why; it stays where it was.
type FailedReplay struct {
	ID        int64  `json:"id"`
	Topic     string `json:"topic"`
	MessageID string `json:"messageId"`
	Reason    string `json:"reason"`
}

// Replayed says where a replayed dead letter went: back into its
// topic's outbox table, at its own offset when it can, so that the relay
// sends it before the records of its key that waited behind it.
type Replayed struct {
	ID              int64  `json:"id"`
	Topic           string `json:"topic"`
	MessageID       string `json:"messageId"`
	NewOutboxOffset int64  `json:"newOutboxOffset"`
}

// OutboxRow names a row of a topic's outbox that waits behind a dead letter.
type OutboxRow = store.OutboxRow

// ErrNotFound is wrapped by Replay when a named dead
// letter does not exist (never did, or was replayed already).
var ErrNotFound = errors.New("no such dead letter")

// ErrNotReplayable is wrapped by Replay when a named dead letter
// lacks what the relay needs to send it with its original identity: an
// event, a message id and a Kafka key (partition_key metadata).
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// List returns the dead letters f selects, oldest first; a
// waiting one says which records of its key wait behind it.
func List(ctx context.Context, db *sql.DB, f ListFilter) ([]DeadLetter, error) {
	rows, err := store.ListDeadLetters(ctx, db, f.Topic, f.Discarded, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead letters: %w", err)
	}
	out, err := postgres.CollectRows(rows, "outbox: list dead letters", func(r *sql.Rows) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil || f.Discarded {
		return out, err
	}
	for i := range out {
		if err := readWaiting(ctx, db, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Discard marks the named dead letters discarded, with reason,
// in one transaction, and returns them: they leave the list, the counts and
// every replay, and stay for `list --discarded`. It is all or nothing: when
// one of ids does not exist or is not waiting (replayed or discarded
// already), nothing changes (ErrNotFound).
func Discard(ctx context.Context, db *sql.DB, ids []int64, reason string) ([]DeadLetter, error) {
	if len(ids) == 0 || strings.TrimSpace(reason) == "" {
		return nil, errors.New("outbox: discard dead letters: ids and a reason are required")
	}
	var out []DeadLetter
	err := postgres.InSQLTx(ctx, db, "outbox: discard dead letters", func(tx *sql.Tx) error {
		rows, err := store.DiscardDeadLetters(ctx, tx, ids, reason)
		if err != nil {
			return fmt.Errorf("outbox: discard dead letters: %w", err)
		}
		out, err = postgres.CollectRows(rows, "outbox: discard dead letters", func(r *sql.Rows) (DeadLetter, error) { return scanDeadLetter(r) })
		if err != nil {
			return err
		}
		if missing := postgres.Missing(ids, out, func(d DeadLetter) int64 { return d.ID }); len(missing) > 0 {
			return fmt.Errorf("%w: %s (never existed, or already replayed or discarded)", ErrNotFound, strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b DeadLetter) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Replay puts the named dead letters back into their topics'
// outbox tables, with their original message id, key and headers, and
// deletes them, in one transaction. It is all or nothing: when one of ids
// does not exist or was discarded (ErrNotFound; a second replay
// of the same id is that case) or cannot be replayed (ErrNotReplayable),
// nothing changes.
func Replay(ctx context.Context, db *sql.DB, ids []int64) ([]Replayed, error) {
	if len(ids) == 0 {
		return nil, errors.New("outbox: replay dead letters: no ids")
	}
	return replay(ctx, db, ids, func(found []DeadLetter) error {
		if missing := postgres.Missing(ids, found, func(d DeadLetter) int64 { return d.ID }); len(missing) > 0 {
			return fmt.Errorf("%w: %s (never existed, or already replayed or discarded)", ErrNotFound, strings.Join(missing, ", "))
		}
		return nil
	})
}

// ReplayAll replays every waiting dead letter of topic (all
// topics when empty), each in a transaction of its own, in id order: one
// that cannot be replayed is returned in failed with the reason and stays,
// and the others are replayed all the same. Run again, it finds only those
// that failed. err is set only when the dead letters could not be read.
func ReplayAll(ctx context.Context, db *sql.DB, topic string) (replayed []Replayed, failed []FailedReplay, err error) {
	waitingOnes, err := List(ctx, db, ListFilter{Topic: topic})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range waitingOnes {
		r, err := replay(ctx, db, []int64{d.ID}, nil)
		switch {
		case err != nil:
			failed = append(failed, FailedReplay{ID: d.ID, Topic: d.Topic, MessageID: d.MessageID, Reason: err.Error()})
		case len(r) == 1: // none: replayed or discarded meanwhile by someone else
			replayed = append(replayed, r[0])
		}
	}
	return replayed, failed, nil
}

// replay moves the waiting dead letters ids back into the outbox in id
// order, which is the order they were dead-lettered.
// FOR UPDATE makes a concurrent replay of the same rows wait, then find them
// gone: a dead letter is replayed once. check may refuse what was found.
func replay(ctx context.Context, db *sql.DB, ids []int64, check func([]DeadLetter) error) ([]Replayed, error) {
	var out []Replayed
	err := postgres.InSQLTx(ctx, db, "outbox: replay dead letters", func(tx *sql.Tx) error {
		rows, err := store.LockDeadLetters(ctx, tx, ids)
		if err != nil {
			return fmt.Errorf("outbox: replay dead letters: %w", err)
		}
		var found []DeadLetter
		var unreplayable []string
		for rows.Next() {
			var ok bool
			d, err := scanDeadLetter(rows, &ok)
			if err != nil {
				rows.Close()
				return fmt.Errorf("outbox: replay dead letters: %w", err)
			}
			if !ok {
				unreplayable = append(unreplayable, fmt.Sprint(d.ID))
			}
			found = append(found, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("outbox: replay dead letters: %w", err)
		}
		if check != nil {
			if err := check(found); err != nil {
				return err
			}
		}
		if len(unreplayable) > 0 {
			return fmt.Errorf("%w: %s: it has no event, message id or partition_key (see docs/runbooks/outbox-backlog.md, Dead letters: Remove the cause)",
				ErrNotReplayable, strings.Join(unreplayable, ", "))
		}

		out = make([]Replayed, 0, len(found))
		for _, d := range found {
			r := Replayed{ID: d.ID, Topic: d.Topic, MessageID: d.MessageID}
			// The outbox row's uuid is the message_id header the relay sends:
			// consumers see the same message again and deduplicate it.
			offset, err := store.Replay(ctx, tx, d.ID)
			if err != nil {
				return fmt.Errorf("outbox: replay dead letter %d into the outbox of %s: %w", d.ID, d.Topic, err)
			}
			r.NewOutboxOffset = offset
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanDeadLetter reads a dead letter in the columns of the store's
// statements, and then into extra.
func scanDeadLetter(rows *sql.Rows, extra ...any) (DeadLetter, error) {
	var d DeadLetter
	var payload, metadata []byte
	var discarded sql.NullTime
	dest := append([]any{&d.ID, &d.Topic, &d.MessageID, &d.OutboxOffset, &d.Attempts, &d.Error,
		&d.DeadLetteredAt, &payload, &metadata, &discarded, &d.DiscardReason, &d.Key}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return DeadLetter{}, err
	}
	d.DeadLetteredAt = d.DeadLetteredAt.UTC()
	if discarded.Valid {
		at := discarded.Time.UTC()
		d.DiscardedAt = &at
	}
	d.Payload, d.Metadata = payload, metadata
	return d, nil
}
