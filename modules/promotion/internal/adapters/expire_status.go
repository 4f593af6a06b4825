package adapters

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/postgres"
)

// backlogQuery counts the expiry's backlog (sql/expire_backlog.sql).
//
//go:embed sql/expire_backlog.sql
var backlogQuery string

// backlog is what backlogQuery reads.
type backlog struct {
	due, poison int        // due Active purchases, poison included; those known as poison
	oldest      *time.Time // the oldest due EndsAt, nil when none is due
}

// readBacklog runs backlogQuery as of asOf; a nil asOf is the database's
// clock.
func readBacklog(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, asOf *time.Time) (backlog, error) {
	var b backlog
	var oldest sql.NullTime
	if err := db.QueryRowContext(ctx, backlogQuery, asOf).Scan(&b.due, &oldest, &b.poison); err != nil {
		return backlog{}, fmt.Errorf("count the expiry's backlog: %w", err)
	}
	if oldest.Valid {
		t := oldest.Time.UTC()
		b.oldest = &t
	}
	return b, nil
}

// ExpiryStatus is the expiry job's state as `pin status` shows it.
type ExpiryStatus struct {
	// Backlog is the Active purchases whose EndsAt has passed, poison
	// included (promotion_expire_backlog leaves poison out).
	Backlog int `json:"backlog"`
	// OldestDueEndsAt is the EndsAt of the longest-waiting of them; null
	// when there is none.
	OldestDueEndsAt *time.Time `json:"oldestDueEndsAt"`
	// Poison is the due Active purchases remembered as poison (all of them:
	// EndsAt is set once, at activation, so a poison purchase stays due):
	// promotion_expire_poison_items.
	Poison int `json:"poison"`
	// LastCycle is the last cycle any instance finished; null before the
	// first.
	LastCycle *LastCycle `json:"lastCycle"`
}

// LastCycle is one finished expiry cycle, as recorded by RecordCycle.
type LastCycle struct {
	// Cycle is what it did, the line `pin expire-promotions --once` prints.
	Cycle      expiry.ExpireCycleResult `json:"cycle"`
	FinishedAt time.Time                `json:"finishedAt"`
	// Instance is the application_name of the session that recorded it
	// (postgres.ApplicationName): pin/<hostname>-<pid>/<role>.
	Instance string `json:"instance"`
	// Error is the infrastructure error that ended the cycle; empty when it
	// completed.
	Error string `json:"error,omitempty"`
}

// RecordCycle implements expiry.ExpireBatchStorage: the one row of
// promotion.expire_last_cycle (migration 00010) is whichever instance's
// cycle finished last.
func (r *ExpireRepository) RecordCycle(ctx context.Context, c expiry.ExpireCycleResult, cycleErr error) error {
	var errText *string
	if cycleErr != nil {
		s := cycleErr.Error()
		errText = &s
	}
	err := r.db.WithContext(ctx).Exec(`INSERT INTO promotion.expire_last_cycle
			(run_id, as_of, finished_at, instance, batches, expired, skipped_locked, failed, duration_ms, error)
		VALUES (?, ?, clock_timestamp(), current_setting('application_name'), ?, ?, ?, ?, ?, ?)
		ON CONFLICT (singleton) DO UPDATE SET run_id = excluded.run_id, as_of = excluded.as_of,
			finished_at = excluded.finished_at, instance = excluded.instance, batches = excluded.batches,
			expired = excluded.expired, skipped_locked = excluded.skipped_locked, failed = excluded.failed,
			duration_ms = excluded.duration_ms, error = excluded.error`,
		c.RunID, c.AsOf, c.Batches, c.Expired, c.SkippedLocked, c.Failed, c.Duration.Milliseconds(), errText).Error
	if err != nil {
		return fmt.Errorf("record the last expiry cycle: %w", err)
	}
	return nil
}

// ReadExpiryStatus reads the expiry's backlog, poison and last cycle, as of
// the database's clock.
func ReadExpiryStatus(ctx context.Context, db postgres.Querier) (ExpiryStatus, error) {
	var s ExpiryStatus
	b, err := readBacklog(ctx, db, nil)
	if err != nil {
		return ExpiryStatus{}, err
	}
	s.Backlog, s.OldestDueEndsAt, s.Poison = b.due, b.oldest, b.poison
	var c LastCycle
	var errText sql.NullString
	var ms int64
	err = db.QueryRowContext(ctx, `SELECT run_id, as_of, finished_at, instance, batches, expired, skipped_locked,
			failed, duration_ms, error FROM promotion.expire_last_cycle`).Scan(&c.Cycle.RunID, &c.Cycle.AsOf, &c.FinishedAt,
		&c.Instance, &c.Cycle.Batches, &c.Cycle.Expired, &c.Cycle.SkippedLocked, &c.Cycle.Failed, &ms, &errText)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s, nil
	case err != nil:
		return ExpiryStatus{}, fmt.Errorf("read the last expiry cycle: %w", err)
	}
	c.Cycle.AsOf, c.FinishedAt, c.Error = c.Cycle.AsOf.UTC(), c.FinishedAt.UTC(), errText.String
	c.Cycle.Duration = time.Duration(ms) * time.Millisecond
	s.LastCycle = &c
	return s, nil
}
