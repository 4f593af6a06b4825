// Package deadletters is the operators' room of the consumer kit: the
// records consumers gave up on, listed, handed to their consumer again or
// set aside (`pin consumer dead-letters`), through the administration the
// outbox's dead letters share (platform/deadletter). The runner writes
// them; this room changes with what an operator needs.
package deadletters

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/consumer/internal/store"
	"github.com/pinmarket/pin/platform/deadletter"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// DeadLetter is one record a consumer gave up on, as an operator lists it
// (`pin consumer dead-letters list`): where it was, its key, headers and
// value as KeyValue shows bytes, and why it was given up.
type DeadLetter struct {
	deadletter.Letter
	// Group is the consumer's name, its Kafka consumer group.
	Group     string `json:"group"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	KeyValue
	// Headers are the record's headers in order; null for a minimal one.
	Headers []KeyValue `json:"headers"`
	// RefusedSQLState is set on a minimal dead letter (the whole row was
	// refused): it holds no bytes of the record and cannot be replayed.
	RefusedSQLState string `json:"refusedSqlstate,omitempty"`
	// Replayable says whether the record's bytes are kept, so that a replay
	// can hand it to its consumer again.
	Replayable bool `json:"replayable"`

	record consumer.Record
}

// KeyValue is a record's key and value, or a header's, for JSON: each is
// text when its bytes are valid UTF-8 (Key, Value) and base64 otherwise
// (KeyBase64, ValueBase64); neither is set for a null.
type KeyValue struct {
	Key         *string `json:"key,omitempty"`
	KeyBase64   string  `json:"keyBase64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"valueBase64,omitempty"`
}

// Replayed says what became of a replayed dead letter: Outcome is
// "applied", "duplicate" (its messageId was in the inbox already), "stale"
// (the version guard refused it) or "skipped" (the handler now declines
// it). In every case the dead letter is gone.
type Replayed struct {
	deadletter.Ref
	Group     string `json:"group"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Outcome   string `json:"outcome"`
}

// FailedReplay is a dead letter ReplayAll could not replay, and why; it
// stays where it was.
type FailedReplay = deadletter.FailedReplay

// ListFilter says which dead letters List returns.
type ListFilter struct {
	// Group keeps those of one consumer; all consumers' when empty.
	Group string
	// Limit caps how many, oldest first; no cap when 0.
	Limit int
	// Discarded lists the discarded ones instead of those waiting.
	Discarded bool
}

// ErrNotFound is wrapped when a named dead letter does not exist (never
// did, or was replayed or discarded already).
var ErrNotFound = deadletter.ErrNotFound

// ErrNotReplayable is wrapped when a named dead letter is a minimal one:
// the record's bytes are only in the topic.
var ErrNotReplayable = deadletter.ErrNotReplayable

// ErrUnknownGroup is wrapped when a dead letter belongs to a consumer the
// replaying process has no Replayer for.
var ErrUnknownGroup = errors.New("no such consumer here")

// side names the consumer kit's dead letters in errors.
const side = "consumer"

// List returns the dead letters f selects, oldest first.
func List(ctx context.Context, db *sql.DB, f ListFilter) ([]DeadLetter, error) {
	rows, err := store.ListDeadLetters(ctx, db, f.Group, f.Discarded, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("consumer: list dead letters: %w", err)
	}
	return postgres.CollectRows(rows, "consumer: list dead letters", scanDeadLetter)
}

// Discard marks the named dead letters discarded, with reason, in one
// transaction, and returns them: they leave the list and every replay, and
// stay for `list --discarded`. It is all or nothing: when one of ids does
// not exist or is not waiting (replayed or discarded already), nothing
// changes (ErrNotFound).
func Discard(ctx context.Context, db *sql.DB, ids []int64, reason string) ([]DeadLetter, error) {
	return deadletter.Discard(ctx, db, table{}, side, ids, reason)
}

// Replay hands the named dead letters, in id order, to their consumers'
// handlers again and deletes them, in one transaction. It is all or
// nothing: when one of ids does not exist (a second replay of the same id
// is that case) or was discarded, is minimal, belongs to a consumer none of
// replayers is, still cannot be decoded or applied, nothing changes.
func Replay(ctx context.Context, db *sql.DB, replayers []consumer.Replayer, ids []int64) ([]Replayed, error) {
	return deadletter.Replay(ctx, db, table{replayers}, side, ids)
}

// ReplayAll replays every waiting dead letter of the consumer named group
// (of every consumer when empty), each in a transaction of its own, in id
// order: one that cannot be replayed (minimal, of a consumer none of
// replayers is, still failing) is returned in failed with the reason and
// stays, and the others are replayed all the same. Run again, it finds only
// those that failed. err is set when group is none of replayers', or the
// dead letters could not be read.
func ReplayAll(ctx context.Context, db *sql.DB, replayers []consumer.Replayer, group string) (replayed []Replayed, failed []FailedReplay, err error) {
	if group != "" && !slices.ContainsFunc(replayers, func(r consumer.Replayer) bool { return r.Group() == group }) {
		return nil, nil, fmt.Errorf("%w: %q (this process replays %s)", ErrUnknownGroup, group, groupNames(replayers))
	}
	waiting, err := List(ctx, db, ListFilter{Group: group})
	if err != nil {
		return nil, nil, err
	}
	replayed, failed = deadletter.ReplayAll(ctx, db, table{replayers}, side, waiting)
	return replayed, failed, nil
}

// table is the consumer kit's dead letters as the shared administration
// changes them (deadletter.Table): a replay hands a dead letter to the
// replayer of its consumer.
type table struct {
	replayers []consumer.Replayer
}

func (table) Discard(ctx context.Context, tx *sql.Tx, ids []int64, reason string) (*sql.Rows, error) {
	return store.DiscardDeadLetters(ctx, tx, ids, reason)
}

func (table) Lock(ctx context.Context, tx *sql.Tx, ids []int64) (*sql.Rows, error) {
	return store.LockDeadLetters(ctx, tx, ids)
}

func (table) Scan(rows *sql.Rows) (DeadLetter, error) { return scanDeadLetter(rows) }

// Replay runs d's record through its consumer's handler, as its runner
// would, in tx, and deletes d.
func (t table) Replay(ctx context.Context, tx *sql.Tx, d DeadLetter) (Replayed, error) {
	if !d.Replayable {
		return Replayed{}, fmt.Errorf("%w: it is a minimal dead letter (SQLSTATE %s): the record is only in the topic, at %s/%d@%d",
			ErrNotReplayable, d.RefusedSQLState, d.Topic, d.Partition, d.Offset)
	}
	i := slices.IndexFunc(t.replayers, func(r consumer.Replayer) bool { return r.Group() == d.Group })
	if i < 0 {
		return Replayed{}, fmt.Errorf("%w: it is of consumer %q; this process replays %s", ErrUnknownGroup, d.Group, groupNames(t.replayers))
	}
	gtx, err := gormOn(tx)
	if err != nil {
		return Replayed{}, err
	}
	outcome, messageID, err := t.replayers[i].Replay(ctx, gtx, d.record)
	if err != nil {
		return Replayed{}, err
	}
	if err := store.DeleteDeadLetter(ctx, tx, d.ID); err != nil {
		return Replayed{}, err
	}
	ref := d.Ref
	ref.MessageID = messageID
	return Replayed{Ref: ref, Group: d.Group, Partition: d.Partition, Offset: d.Offset, Outcome: outcome}, nil
}

// gormOn is a GORM session in tx, for the handler's Apply, which takes one;
// its own transaction becomes a savepoint of tx.
func gormOn(tx *sql.Tx) (*gorm.DB, error) {
	g, err := gorm.Open(gormpostgres.New(gormpostgres.Config{Conn: tx}),
		&gorm.Config{DisableAutomaticPing: true, Logger: gormlogger.Discard})
	if err != nil {
		return nil, fmt.Errorf("GORM on the replay's transaction: %w", err)
	}
	return g, nil
}

// scanDeadLetter reads a dead letter in the columns of the store's
// statements, and the record it keeps.
func scanDeadLetter(rows *sql.Rows) (DeadLetter, error) {
	var d DeadLetter
	var keys, values [][]byte
	var key, value []byte
	types := pgtype.NewMap()
	var discarded sql.NullTime
	if err := rows.Scan(&d.ID, &d.Group, &d.Topic, &d.Partition, &d.Offset, &key, &value,
		types.SQLScanner(&keys), types.SQLScanner(&values),
		&d.Error, &d.Attempts, &d.DeadLetteredAt, &d.RefusedSQLState, &d.Replayable,
		&discarded, &d.DiscardReason); err != nil {
		return DeadLetter{}, err
	}
	d.DeadLetteredAt = d.DeadLetteredAt.UTC()
	if discarded.Valid {
		at := discarded.Time.UTC()
		d.DiscardedAt = &at
	}
	d.KeyValue = newKeyValue(key, value)
	d.record = consumer.Record{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Key: key, Value: value,
		Headers: make(map[string]string, len(keys))}
	if keys != nil {
		d.Headers = make([]KeyValue, 0, len(keys))
	}
	for i := range keys {
		h := consumer.Header{Key: keys[i], Value: values[i]}
		d.record.HeaderList = append(d.record.HeaderList, h)
		d.record.Headers[string(h.Key)] = string(h.Value)
		d.Headers = append(d.Headers, newKeyValue(h.Key, h.Value))
	}
	d.MessageID = store.Readable(d.record.Headers[kafka.HeaderMessageID])
	return d, nil
}

// newKeyValue shows key and value as JSON can carry them.
func newKeyValue(key, value []byte) KeyValue {
	var kv KeyValue
	kv.Key, kv.KeyBase64 = textOrBase64(key)
	kv.Value, kv.ValueBase64 = textOrBase64(value)
	return kv
}

// textOrBase64 is b as text when it is valid UTF-8, in base64 otherwise,
// neither for nil.
func textOrBase64(b []byte) (*string, string) {
	switch {
	case b == nil:
		return nil, ""
	case utf8.Valid(b):
		s := string(b)
		return &s, ""
	default:
		return nil, base64.StdEncoding.EncodeToString(b)
	}
}

// groupNames lists the replayers' consumers for an error message.
func groupNames(replayers []consumer.Replayer) string {
	names := make([]string, len(replayers))
	for i, r := range replayers {
		names[i] = fmt.Sprintf("%q", r.Group())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
