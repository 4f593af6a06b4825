package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
	"github.com/pinmarket/pin/platform/postgres"
)

// TopicStatus is the state of one topic's outbox, as `pin status` shows it.
type TopicStatus struct {
	Topic string `json:"topic"`
	// Backlog is the committed rows the relay has not sent yet and may
	// send: those held behind a dead letter of their key are in Held.
	Backlog int64 `json:"backlog"`
	// Oldest is the oldest of them; null when the backlog is empty.
	Oldest *OutboxRow `json:"oldest"`
	// Held is the keys that wait behind a dead letter, and their records.
	Held HeldKeys `json:"held"`
	// Leader is the session holding the topic's relay lock; null when no
	// relay leads (none runs, or a takeover is under way).
	Leader *Leader `json:"leader"`
	// DeadLetters waiting for an operator, and those discarded.
	DeadLetters          int64 `json:"deadLetters"`
	DiscardedDeadLetters int64 `json:"discardedDeadLetters"`
}

// OutboxRow names a row of a topic's outbox.
type OutboxRow = store.OutboxRow

// Leader is the PostgreSQL session that holds a topic's relay lock.
type Leader struct {
	PID int `json:"pid"`
	// ApplicationName names the instance: pin/<hostname>-<pid>/relay when
	// the relay set it (Config.ApplicationName).
	ApplicationName string    `json:"applicationName"`
	ClientAddr      string    `json:"clientAddr"`
	BackendStart    time.Time `json:"backendStart"`
}

// ReadStatus reads the state of topic's outbox from db, a pool or a
// snapshot (postgres.InSnapshot: its backlog and oldest row then agree).
// The leader is found as the runbook's lock-holder query finds it
// (docs/runbooks/outbox-backlog.md).
func ReadStatus(ctx context.Context, db postgres.Querier, topic string) (TopicStatus, error) {
	if err := outbox.CheckTopic(topic); err != nil {
		return TopicStatus{}, err
	}
	s := TopicStatus{Topic: topic}
	var o OutboxRow
	err := store.Oldest(ctx, db, topic).
		Scan(&o.Offset, &o.MessageID, &o.CreatedAt, &o.AgeSeconds)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return TopicStatus{}, fmt.Errorf("outbox: status of %s: %w", topic, err)
	default:
		o.CreatedAt = o.CreatedAt.UTC()
		s.Oldest = &o
	}
	if s.Backlog, _, err = store.Backlog(ctx, db, topic); err != nil {
		return TopicStatus{}, fmt.Errorf("outbox: status of %s: %w", topic, err)
	}
	if s.DeadLetters, s.DiscardedDeadLetters, err = store.DeadLetterCounts(ctx, db, topic); err != nil {
		return TopicStatus{}, fmt.Errorf("outbox: status of %s: %w", topic, err)
	}
	if s.Held, err = readHeld(ctx, db, topic); err != nil {
		return TopicStatus{}, err
	}
	var l Leader
	err = db.QueryRowContext(ctx, `SELECT a.pid, a.application_name, COALESCE(host(a.client_addr), 'local'), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)`, lockName(topic)).
		Scan(&l.PID, &l.ApplicationName, &l.ClientAddr, &l.BackendStart)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return TopicStatus{}, fmt.Errorf("outbox: relay leader of %s: %w", topic, err)
	default:
		l.BackendStart = l.BackendStart.UTC()
		s.Leader = &l
	}
	return s, nil
}
