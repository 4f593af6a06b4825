package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// ExpiryStatus is the expiry job's state as `pin status` shows it.
type ExpiryStatus struct {
	// Backlog is the Active purchases whose EndsAt has passed, poison
	// included (promotion_expire_backlog leaves poison out).
	Backlog int `json:"backlog"`
	// OldestDueEndsAt is the EndsAt of the longest-waiting of them; null
	// when there is none.
	OldestDueEndsAt *time.Time `json:"oldestDueEndsAt"`
	// Poison is the Active purchases remembered as poison:
	// promotion_expire_poison_items.
	Poison int `json:"poison"`
	// LastCycle is the last cycle any instance finished; null before the
	// first.
	LastCycle *LastCycle `json:"lastCycle"`
}

// LastCycle is one finished expiry cycle, as recorded by RecordCycle.
type LastCycle struct {
	// Cycle is what it did, the line `pin expire-promotions --once` prints.
	Cycle      app.ExpireCycleResult `json:"cycle"`
	FinishedAt time.Time             `json:"finishedAt"`
	// Instance is the application_name of the session that recorded it
	// (postgres.ApplicationName): pin/<hostname>-<pid>/<role>.
	Instance string `json:"instance"`
	// Error is the infrastructure error that ended the cycle; empty when it
	// completed.
	Error string `json:"error,omitempty"`
}

// RecordCycle implements app.ExpireBatchStorage: the one row of
// promotion.expire_last_cycle (migration 00010) is whichever instance's
// cycle finished last.
func (r *ExpireRepository) RecordCycle(ctx context.Context, c app.ExpireCycleResult, cycleErr error) error {
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
func ReadExpiryStatus(ctx context.Context, db *sql.DB) (ExpiryStatus, error) {
	var s ExpiryStatus
	var oldest sql.NullTime
	err := db.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Active' AND ends_at <= now()),
			(SELECT min(ends_at) FROM promotion.promotion_purchases WHERE status = 'Active' AND ends_at <= now()),
			(SELECT count(*) FROM promotion.expire_poison x JOIN promotion.promotion_purchases p ON p.id = x.purchase_id
				WHERE p.status = 'Active')`).Scan(&s.Backlog, &oldest, &s.Poison)
	if err != nil {
		return ExpiryStatus{}, fmt.Errorf("read the expiry's state: %w", err)
	}
	if oldest.Valid {
		t := oldest.Time.UTC()
		s.OldestDueEndsAt = &t
	}
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
