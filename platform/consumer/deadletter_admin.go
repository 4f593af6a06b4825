package consumer

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// DeadLetter is one record a consumer gave up on, as an operator lists it
// (`pin consumer dead-letters list`): where it was, its key, headers and
// value as KeyValue shows bytes, and why it was given up.
type DeadLetter struct {
	DeadLetterRef
	KeyValue
	// Headers are the record's headers in order; null for a minimal one.
	Headers        []KeyValue `json:"headers"`
	Error          string     `json:"error"`
	Attempts       int        `json:"attempts"`
	DeadLetteredAt time.Time  `json:"deadLetteredAt"`
	// RefusedSQLState is set on a minimal dead letter (the whole row was
	// refused): it holds no bytes of the record and cannot be replayed.
	RefusedSQLState string `json:"refusedSqlstate,omitempty"`
	// Replayable says whether the record's bytes are kept, so that a replay
	// can hand it to its consumer again.
	Replayable bool `json:"replayable"`
	// DiscardedAt and DiscardReason are set on a discarded dead letter
	// (DiscardDeadLetters): kept for the record, never replayed.
	DiscardedAt   *time.Time `json:"discardedAt,omitempty"`
	DiscardReason string     `json:"discardReason,omitempty"`

	record Record
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

// DeadLetterRef names a dead letter and the record it keeps.
type DeadLetterRef struct {
	ID int64 `json:"id"`
	// Group is the consumer's name, its Kafka consumer group.
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// MessageID is the record's message_id header, empty when it had none.
	MessageID string `json:"messageId"`
}

// ReplayedDeadLetter says what became of a replayed dead letter: Outcome
// is "applied", "duplicate" (its messageId was in the inbox already),
// "stale" (the version guard refused it) or "skipped" (the handler now
// declines it). In every case the dead letter is gone.
type ReplayedDeadLetter struct {
	DeadLetterRef
	Outcome string `json:"outcome"`
}

// FailedReplay is a dead letter ReplayAllDeadLetters could not replay, and
// why; it stays where it was.
type FailedReplay struct {
	DeadLetterRef
	Reason string `json:"reason"`
}

// ListFilter says which dead letters ListDeadLetters returns.
type ListFilter struct {
	// Group keeps those of one consumer; all consumers' when empty.
	Group string
	// Limit caps how many, oldest first; no cap when 0.
	Limit int
	// Discarded lists the discarded ones instead of those waiting.
	Discarded bool
}

// ErrDeadLetterNotFound is wrapped when a named dead letter does not exist
// (never did, or was replayed already).
var ErrDeadLetterNotFound = errors.New("no such dead letter")

// ErrNotReplayable is wrapped when a named dead letter is a minimal one:
// the record's bytes are only in the topic.
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// ErrUnknownGroup is wrapped when a dead letter belongs to a consumer the
// replaying process has no Replayer for.
var ErrUnknownGroup = errors.New("no such consumer here")

// Replayer is one consumer as a replay needs it: its name and its handler,
// behind a face that does not depend on the handler's event type.
type Replayer interface {
	// Group is the consumer's name (Config.Name).
	Group() string
	// replay applies rec as the consumer's runner would, inside tx.
	replay(ctx context.Context, tx *gorm.DB, rec Record) (outcome string, messageID string, err error)
}

// NewReplayer is the Replayer of the consumer named group with handler: the
// same pair its Runner is built with.
func NewReplayer[B any](group string, handler Handler[B], logger *slog.Logger) Replayer {
	return replayer[B]{group: group, handler: handler, logger: logger}
}

type replayer[B any] struct {
	group   string
	handler Handler[B]
	logger  *slog.Logger
}

func (p replayer[B]) Group() string { return p.group }

// replay runs the runner's own decode and apply, so a replayed record passes
// the same inbox and version guard as a delivered one; tx makes the apply a
// savepoint of the replay's transaction.
func (p replayer[B]) replay(ctx context.Context, tx *gorm.DB, rec Record) (string, string, error) {
	r := &Runner[B]{db: tx, cfg: Config{Name: p.group}, handler: p.handler, logger: p.logger}
	e, err := r.decodeSafely(rec)
	if errors.Is(err, ErrSkip) {
		return outcomeSkipped.String(), rec.Headers[kafka.HeaderMessageID], nil
	}
	if err != nil {
		return "", "", fmt.Errorf("still cannot be decoded: %w", err)
	}
	outs, err := r.apply(ctx, []Event[B]{e})
	if err != nil {
		return "", "", fmt.Errorf("apply: %w", err)
	}
	return outs[0].String(), e.MessageID.String(), nil
}

// replayableDeadLetter holds for a row that kept the record's bytes: every
// row but a minimal one.
const replayableDeadLetter = `refused_sqlstate IS NULL AND header_keys IS NOT NULL`

// deadLetterColumns are read by ListDeadLetters and the replays, in the
// order of scanDeadLetter.
const deadLetterColumns = `id, consumer, topic, kafka_partition, kafka_offset, record_key, value,
	header_keys, header_values, error, attempts, dead_lettered_at, COALESCE(refused_sqlstate, ''),
	(` + replayableDeadLetter + `), discarded_at, COALESCE(discard_reason, '')`

// waiting holds for a dead letter no operator discarded: the ones listed
// and replayed.
const waiting = `discarded_at IS NULL`

// ListDeadLetters returns the dead letters f selects, oldest first.
func ListDeadLetters(ctx context.Context, db *sql.DB, f ListFilter) ([]DeadLetter, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+deadLetterColumns+` FROM consumer.dead_letters
		WHERE ($1 = '' OR consumer = $1) AND (discarded_at IS NOT NULL) = $2
		ORDER BY id LIMIT NULLIF($3, 0)`, f.Group, f.Discarded, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("consumer: list dead letters: %w", err)
	}
	return postgres.CollectRows(rows, "consumer: list dead letters", scanDeadLetter)
}

// DiscardDeadLetters marks the named dead letters discarded, with reason,
// in one transaction, and returns them: they leave the list and every
// replay, and stay for `list --discarded`. It is all or nothing: when one
// of ids does not exist or is not waiting (replayed or discarded already),
// nothing changes (ErrDeadLetterNotFound).
func DiscardDeadLetters(ctx context.Context, db *sql.DB, ids []int64, reason string) ([]DeadLetter, error) {
	if len(ids) == 0 || strings.TrimSpace(reason) == "" {
		return nil, errors.New("consumer: discard dead letters: ids and a reason are required")
	}
	var out []DeadLetter
	err := postgres.InSQLTx(ctx, db, "consumer: discard dead letters", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE consumer.dead_letters SET discarded_at = now(), discard_reason = $2
			WHERE id = ANY($1) AND `+waiting+` RETURNING `+deadLetterColumns, ids, reason)
		if err != nil {
			return fmt.Errorf("consumer: discard dead letters: %w", err)
		}
		if out, err = postgres.CollectRows(rows, "consumer: discard dead letters", scanDeadLetter); err != nil {
			return err
		}
		if missing := postgres.Missing(ids, out, func(d DeadLetter) int64 { return d.ID }); len(missing) > 0 {
			return fmt.Errorf("%w: %s (never existed, or already replayed or discarded)", ErrDeadLetterNotFound, strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b DeadLetter) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ReplayDeadLetters hands the named dead letters, in id order, to their
// consumers' handlers again and deletes them, in one transaction. It is all
// or nothing: when one of ids does not exist (a second replay of the same
// id is that case) or was discarded, is minimal, belongs to a consumer none
// of replayers is, still cannot be decoded or applied, nothing changes.
func ReplayDeadLetters(ctx context.Context, db *gorm.DB, replayers []Replayer, ids []int64) ([]ReplayedDeadLetter, error) {
	if len(ids) == 0 {
		return nil, errors.New("consumer: replay dead letters: no ids")
	}
	return replay(ctx, db, replayers, `id = ANY($1) AND `+waiting, ids, func(found []DeadLetter) error {
		if missing := postgres.Missing(ids, found, func(d DeadLetter) int64 { return d.ID }); len(missing) > 0 {
			return fmt.Errorf("%w: %s (never existed, or already replayed or discarded)", ErrDeadLetterNotFound, strings.Join(missing, ", "))
		}
		return nil
	})
}

// ReplayAllDeadLetters replays every waiting dead letter of the consumer
// named group (of every consumer when empty), each in a transaction of its
// own, in id order: one that cannot be replayed (minimal, of a consumer
// none of replayers is, still failing) is returned in failed with the
// reason and stays, and the others are replayed all the same. Run again, it
// finds only those that failed. err is set when group is none of
// replayers', or the dead letters could not be read.
func ReplayAllDeadLetters(ctx context.Context, db *gorm.DB, replayers []Replayer, group string) (replayed []ReplayedDeadLetter, failed []FailedReplay, err error) {
	if group != "" && !slices.ContainsFunc(replayers, func(r Replayer) bool { return r.Group() == group }) {
		return nil, nil, fmt.Errorf("%w: %q (this process replays %s)", ErrUnknownGroup, group, groupNames(replayers))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, fmt.Errorf("consumer: replay dead letters: %w", err)
	}
	waitingOnes, err := ListDeadLetters(ctx, sqlDB, ListFilter{Group: group})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range waitingOnes {
		r, err := replay(ctx, db, replayers, `id = $1 AND `+waiting, d.ID, nil)
		switch {
		case err != nil:
			failed = append(failed, FailedReplay{DeadLetterRef: d.DeadLetterRef, Reason: err.Error()})
		case len(r) == 1: // none: replayed or discarded meanwhile by someone else
			replayed = append(replayed, r[0])
		}
	}
	return replayed, failed, nil
}

// replay hands the dead letters matching where (with its one argument) to
// their consumers in id order, the order they were dead-lettered, and
// deletes them. FOR UPDATE makes a concurrent replay of the same rows wait,
// then find them gone: a dead letter is replayed once. check may refuse
// what was found.
func replay(ctx context.Context, db *gorm.DB, replayers []Replayer, where string, arg any, check func([]DeadLetter) error) ([]ReplayedDeadLetter, error) {
	var out []ReplayedDeadLetter
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		rows, err := tx.Statement.ConnPool.QueryContext(ctx, `SELECT `+deadLetterColumns+`
			FROM consumer.dead_letters WHERE `+where+` ORDER BY id FOR UPDATE`, arg)
		if err != nil {
			return err
		}
		var found []DeadLetter
		for rows.Next() {
			d, err := scanDeadLetter(rows)
			if err != nil {
				_ = rows.Close()
				return err
			}
			found = append(found, d)
		}
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if check != nil {
			if err := check(found); err != nil {
				return err
			}
		}
		for _, d := range found {
			if !d.Replayable {
				return fmt.Errorf("%w: %d is a minimal dead letter (SQLSTATE %s): the record is only in the topic, at %s/%d@%d",
					ErrNotReplayable, d.ID, d.RefusedSQLState, d.Topic, d.Partition, d.Offset)
			}
			i := slices.IndexFunc(replayers, func(r Replayer) bool { return r.Group() == d.Group })
			if i < 0 {
				return fmt.Errorf("%w: dead letter %d is of consumer %q; this process replays %s",
					ErrUnknownGroup, d.ID, d.Group, groupNames(replayers))
			}
			outcome, messageID, err := replayers[i].replay(ctx, tx, d.record)
			if err != nil {
				return fmt.Errorf("dead letter %d: %w (nothing replayed)", d.ID, err)
			}
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, `DELETE FROM consumer.dead_letters WHERE id = $1`, d.ID); err != nil {
				return err
			}
			ref := d.DeadLetterRef
			ref.MessageID = messageID
			out = append(out, ReplayedDeadLetter{DeadLetterRef: ref, Outcome: outcome})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: replay dead letters: %w", err)
	}
	return out, nil
}

// scanDeadLetter reads deadLetterColumns, and the record they keep.
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
	d.record = Record{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Key: key, Value: value,
		Headers: make(map[string]string, len(keys))}
	if keys != nil {
		d.Headers = make([]KeyValue, 0, len(keys))
	}
	for i := range keys {
		h := Header{Key: keys[i], Value: values[i]}
		d.record.HeaderList = append(d.record.HeaderList, h)
		d.record.Headers[string(h.Key)] = string(h.Value)
		d.Headers = append(d.Headers, newKeyValue(h.Key, h.Value))
	}
	d.MessageID = readable(d.record.Headers[kafka.HeaderMessageID])
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
func groupNames(replayers []Replayer) string {
	names := make([]string, len(replayers))
	for i, r := range replayers {
		names[i] = fmt.Sprintf("%q", r.Group())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
