// Package deadletters is the operators' room of the outbox: the relay's dead
// letters listed, put back into the outbox or set aside (`pin outbox
// dead-letters`), through the administration the consumer kit's dead
// letters share (platform/deadletter).
package deadletters

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/pinmarket/pin/platform/deadletter"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
	"github.com/pinmarket/pin/platform/postgres"
)

// DeadLetter is one message the relay gave up on, as an operator lists it
// (`pin outbox dead-letters list`): a row of outbox.dead_letters, with the
// event and its Kafka metadata as they were in the outbox.
type DeadLetter struct {
	deadletter.Letter
	OutboxOffset int64           `json:"outboxOffset"`
	Payload      json.RawMessage `json:"payload"`
	Metadata     json.RawMessage `json:"metadata"`
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

	// replayable says whether it has what the relay needs to send it with
	// its original identity: an event, a message id and a key.
	replayable bool
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

// FailedReplay is a dead letter ReplayAll could not replay, and why; it
// stays where it was.
type FailedReplay = deadletter.FailedReplay

// Replayed says where a replayed dead letter went: back into its
// topic's outbox table, at its own offset when it can, so that the relay
// sends it before the records of its key that waited behind it.
type Replayed struct {
	deadletter.Ref
	NewOutboxOffset int64 `json:"newOutboxOffset"`
}

// OutboxRow names a row of a topic's outbox that waits behind a dead letter.
type OutboxRow = store.OutboxRow

// ErrNotFound is wrapped by Replay and Discard when a named dead letter does
// not exist (never did, or was replayed or discarded already).
var ErrNotFound = deadletter.ErrNotFound

// ErrNotReplayable is wrapped by Replay when a named dead letter lacks what
// the relay needs to send it with its original identity: an event, a
// message id and a Kafka key (partition_key metadata).
var ErrNotReplayable = deadletter.ErrNotReplayable

// side names the outbox's dead letters in errors.
const side = "outbox"

// List returns the dead letters f selects, oldest first; a
// waiting one says which records of its key wait behind it.
func List(ctx context.Context, db *sql.DB, f ListFilter) ([]DeadLetter, error) {
	rows, err := store.ListDeadLetters(ctx, db, f.Topic, f.Discarded, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead letters: %w", err)
	}
	out, err := postgres.CollectRows(rows, "outbox: list dead letters", scanDeadLetter)
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
	return deadletter.Discard(ctx, db, table{}, side, ids, reason)
}

// Replay puts the named dead letters back into their topics'
// outbox tables, with their original message id, key and headers, and
// deletes them, in one transaction. It is all or nothing: when one of ids
// does not exist or was discarded (ErrNotFound; a second replay
// of the same id is that case) or cannot be replayed (ErrNotReplayable),
// nothing changes.
func Replay(ctx context.Context, db *sql.DB, ids []int64) ([]Replayed, error) {
	return deadletter.Replay(ctx, db, table{}, side, ids)
}

// ReplayAll replays every waiting dead letter of topic (all
// topics when empty), each in a transaction of its own, in id order: one
// that cannot be replayed is returned in failed with the reason and stays,
// and the others are replayed all the same. Run again, it finds only those
// that failed. err is set only when the dead letters could not be read.
func ReplayAll(ctx context.Context, db *sql.DB, topic string) (replayed []Replayed, failed []FailedReplay, err error) {
	waiting, err := List(ctx, db, ListFilter{Topic: topic})
	if err != nil {
		return nil, nil, err
	}
	replayed, failed = deadletter.ReplayAll(ctx, db, table{}, side, waiting)
	return replayed, failed, nil
}

// table is the outbox's dead letters as the shared administration changes
// them (deadletter.Table).
type table struct{}

func (table) Discard(ctx context.Context, tx *sql.Tx, ids []int64, reason string) (*sql.Rows, error) {
	return store.DiscardDeadLetters(ctx, tx, ids, reason)
}

func (table) Lock(ctx context.Context, tx *sql.Tx, ids []int64) (*sql.Rows, error) {
	return store.LockDeadLetters(ctx, tx, ids)
}

func (table) Scan(rows *sql.Rows) (DeadLetter, error) { return scanDeadLetter(rows) }

// Replay puts d back into its topic's outbox. The outbox row's uuid is the
// message_id header the relay sends: consumers see the same message again
// and deduplicate it.
func (table) Replay(ctx context.Context, tx *sql.Tx, d DeadLetter) (Replayed, error) {
	if !d.replayable {
		return Replayed{}, fmt.Errorf("%w: it has no event, message id or partition_key (see docs/runbooks/outbox-backlog.md, Dead letters: Remove the cause)",
			ErrNotReplayable)
	}
	offset, err := store.Replay(ctx, tx, d.ID)
	if err != nil {
		return Replayed{}, fmt.Errorf("into the outbox of %s: %w", d.Topic, err)
	}
	return Replayed{Ref: d.Ref, NewOutboxOffset: offset}, nil
}

// scanDeadLetter reads a dead letter in the columns of the store's
// statements.
func scanDeadLetter(rows *sql.Rows) (DeadLetter, error) {
	var d DeadLetter
	var payload, metadata []byte
	var discarded sql.NullTime
	if err := rows.Scan(&d.ID, &d.Topic, &d.MessageID, &d.OutboxOffset, &d.Attempts, &d.Error,
		&d.DeadLetteredAt, &payload, &metadata, &discarded, &d.DiscardReason, &d.Key, &d.replayable); err != nil {
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
