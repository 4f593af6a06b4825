package expiry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// ExpireBatchStorage is the I/O of one expiry batch; ExpireBatches holds
// its policy: which rows go on alone after a refusal, what becomes poison,
// when to reread.
type ExpireBatchStorage interface {
	// InBatch runs fn in one transaction bounded in time on the server
	// (ADR 0014): it commits when fn returns nil; fn's error, or any
	// other, rolls it back whole and is returned.
	InBatch(ctx context.Context, fn func(ExpireTx) error) error
	// CountBacklog is ExpireStore's.
	CountBacklog(ctx context.Context, asOf time.Time) (ExpireBacklog, error)
	// RecordCycle is ExpireStore's.
	RecordCycle(ctx context.Context, c ExpireCycleResult, cycleErr error) error
}

// ExpireTx is one batch's transaction.
type ExpireTx interface {
	// Select locks up to b.Limit due purchases, skipping rows another
	// transaction holds, and the known poison b.RetryPoison allows.
	Select(ctx context.Context, b ExpireBatch) (ExpireSelection, error)
	// Prepare builds each expiry's events; the expiries whose events
	// cannot be built (an error or a panic) come back as failed.
	Prepare(ctx context.Context, es []Expiry) (ready []Expiry, failed []FailedExpiry)
	// WriteAll writes every expiry and its events by one statement per
	// chunk of them, and forgets the written ones' poison records when
	// forgetPoison. It returns those a version guard passed over. A refusal
	// that may be one row's is a *RowRefusal; the batch is then rolled back.
	WriteAll(ctx context.Context, es []Expiry, forgetPoison bool) (unwritten []Expiry, err error)
	// WriteOne writes one expiry and its events under a savepoint: false
	// when the version guard passed it over. A *RowRefusal says its own
	// statement or event was refused, and it is rolled back alone; any
	// other error is the batch's.
	WriteOne(ctx context.Context, e Expiry) (bool, error)
	// ForgetPoison deletes the poison records of the purchases.
	ForgetPoison(ctx context.Context, ids []uuid.UUID) error
	// Reread returns the purchases' rows as they are now; a purchase that
	// is gone is absent.
	Reread(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]SupersededExpiry, error)
	// RememberPoison records one more failure of each purchase, at asOf.
	RememberPoison(ctx context.Context, asOf time.Time, failed []FailedExpiry) error
}

// ExpireSelection is what ExpireTx.Select locked.
type ExpireSelection struct {
	// Locked are the purchases locked, in selection order.
	Locked []LockedPurchase
	// Failed are the rows locked that do not load as a purchase.
	Failed []FailedExpiry
	// Retried, SkippedLocked and KeptForPoison are ExpireBatchResult's.
	Retried, SkippedLocked, KeptForPoison int
}

// LockedPurchase is a purchase the batch holds.
type LockedPurchase struct {
	Purchase *domain.Purchase
	// Retry marks known poison taken again.
	Retry bool
}

// Expiry is a locked purchase after its transition to Expired.
type Expiry struct {
	Purchase        *domain.Purchase
	PreviousVersion int64
	Retry           bool
}

// RowRefusal is a store's error for a write refused in a way that may be
// one row's own (ADR 0014): a data error of the row's own statement on its
// table, or its event refused for its size (ADR 0015).
type RowRefusal struct {
	// Refusal names what refused it (SQLSTATE, table, constraint); empty
	// for a refusal found in Go.
	Refusal string
	Err     error
}

// Error implements error.
func (e *RowRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the refusal's error.
func (e *RowRefusal) Unwrap() error { return e.Err }

// ExpireBatches is the expiry batch's policy over its storage; it is the
// cycle's ExpireStore.
type ExpireBatches struct {
	storage ExpireBatchStorage
}

var _ ExpireStore = (*ExpireBatches)(nil)

// NewExpireBatches returns the policy over storage.
func NewExpireBatches(storage ExpireBatchStorage) (*ExpireBatches, error) {
	if storage == nil {
		return nil, errors.New("app: expire batches: a storage is required")
	}
	return &ExpireBatches{storage: storage}, nil
}

// CountBacklog implements ExpireStore.
func (e *ExpireBatches) CountBacklog(ctx context.Context, asOf time.Time) (ExpireBacklog, error) {
	return e.storage.CountBacklog(ctx, asOf)
}

// RecordCycle implements ExpireStore.
func (e *ExpireBatches) RecordCycle(ctx context.Context, c ExpireCycleResult, cycleErr error) error {
	return e.storage.RecordCycle(ctx, c, cycleErr)
}

// ExpireBatch implements ExpireStore. Every poison check (transition,
// event) runs before the first write, and the rows stay locked until the
// commit. The batch is written by one statement (per chunk); when that may have been
// refused for a row's data (a *RowRefusal), the batch is rolled back and
// done again row by row, so only that row is set aside; any other error
// rolls it back whole, and so does a redo in which every due row was
// refused alike (RefusedAlike).
func (e *ExpireBatches) ExpireBatch(ctx context.Context, b ExpireBatch) (ExpireBatchResult, error) {
	res, err := e.run(ctx, b, false)
	var refusal *RowRefusal
	if errors.As(err, &refusal) {
		res, err = e.run(ctx, b, true)
	}
	return res, err
}

// RowByRow runs a batch straight on the row-by-row write, as ExpireBatch
// redoes it after a refusal: for tests of that write's statements.
func (e *ExpireBatches) RowByRow(ctx context.Context, b ExpireBatch) (ExpireBatchResult, error) {
	return e.run(ctx, b, true)
}

func (e *ExpireBatches) run(ctx context.Context, b ExpireBatch, rowByRow bool) (ExpireBatchResult, error) {
	if b.Limit <= 0 || b.Expire == nil {
		return ExpireBatchResult{}, errors.New("expire batch: a positive limit and an Expire func are required")
	}
	var res ExpireBatchResult
	err := e.storage.InBatch(ctx, func(tx ExpireTx) error {
		sel, err := tx.Select(ctx, b)
		if err != nil {
			return err
		}
		res = ExpireBatchResult{Selected: len(sel.Locked) + len(sel.Failed), Retried: sel.Retried,
			SkippedLocked: sel.SkippedLocked, KeptForPoison: sel.KeptForPoison, Failed: sel.Failed}
		expiries := make([]Expiry, 0, len(sel.Locked))
		for _, l := range sel.Locked {
			ex, err := expire(l, b.Expire)
			if err != nil {
				res.Failed = append(res.Failed, FailedExpiry{PurchaseID: l.Purchase.ID(), Err: err})
				continue
			}
			expiries = append(expiries, ex)
		}
		if len(expiries) == 0 {
			return tx.RememberPoison(ctx, b.AsOf, res.Failed)
		}
		expiries, unprepared := tx.Prepare(ctx, expiries)
		res.Failed = append(res.Failed, unprepared...)
		var written, unwritten []Expiry
		if rowByRow {
			var refused []FailedExpiry
			written, unwritten, refused, err = writeRowByRow(ctx, tx, expiries)
			res.Failed = append(res.Failed, refused...)
		} else {
			unwritten, err = tx.WriteAll(ctx, expiries, res.Retried > 0)
			written = without(expiries, unwritten)
		}
		if err != nil {
			return err
		}
		superseded, skipped, err := reread(ctx, tx, unwritten)
		if err != nil {
			return err
		}
		res.Superseded, res.Failed = superseded, append(res.Failed, skipped...)
		if err := tx.RememberPoison(ctx, b.AsOf, res.Failed); err != nil {
			return err
		}
		for _, ex := range written {
			res.Expired = append(res.Expired, ex.Purchase)
		}
		return nil
	})
	if err != nil {
		return ExpireBatchResult{}, err
	}
	return res, nil
}

// expire applies the transition to a locked purchase. A panic becomes the
// purchase's error: it concerns this purchase only.
func expire(l LockedPurchase, transit func(*domain.Purchase) error) (ex Expiry, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("purchase %s: panic while expiring it: %v", l.Purchase.ID(), r)
		}
	}()
	p, previous := l.Purchase, l.Purchase.Version()
	if err := transit(p); err != nil {
		return Expiry{}, fmt.Errorf("expire: %w", err)
	}
	if p.Version() == previous || p.Status() != domain.StatusExpired {
		return Expiry{}, fmt.Errorf("expire: purchase %s made no transition to Expired", p.ID())
	}
	return Expiry{Purchase: p, PreviousVersion: previous, Retry: l.Retry}, nil
}

// writeRowByRow writes each expiry alone, so a row whose own write is
// refused (*RowRefusal) is set aside and the others are kept, then forgets
// the written ones' poison records. When every due row was refused alike,
// the batch fails (RefusedAlike): known poison retried is left out of that
// count, it is known to fail.
func writeRowByRow(ctx context.Context, tx ExpireTx, es []Expiry) (written, unwritten []Expiry, refused []FailedExpiry, err error) {
	tried := 0
	var due []FailedExpiry
	for _, ex := range es {
		if !ex.Retry {
			tried++
		}
		ok, err := tx.WriteOne(ctx, ex)
		var refusal *RowRefusal
		switch {
		case errors.As(err, &refusal):
			f := FailedExpiry{PurchaseID: ex.Purchase.ID(), Err: refusal.Err, Refusal: refusal.Refusal}
			refused = append(refused, f)
			if !ex.Retry {
				due = append(due, f)
			}
		case err != nil:
			return nil, nil, nil, err
		case ok:
			written = append(written, ex)
		default:
			unwritten = append(unwritten, ex)
		}
	}
	if err := RefusedAlike(tried, due); err != nil {
		return nil, nil, nil, err
	}
	if len(written) > 0 {
		if err := tx.ForgetPoison(ctx, ids(written)); err != nil {
			return nil, nil, nil, err
		}
	}
	return written, unwritten, refused, nil
}

// reread reads the rows the version guard passed over again. A row whose
// version moved on (or that is gone) lost a race to another writer: it is
// superseded, not poison, and the next selection sees its new state. A row
// still at the version it was loaded at was skipped for a reason of its own
// (a trigger or rule) and is poison.
func reread(ctx context.Context, tx ExpireTx, unwritten []Expiry) ([]SupersededExpiry, []FailedExpiry, error) {
	if len(unwritten) == 0 {
		return nil, nil, nil
	}
	current, err := tx.Reread(ctx, ids(unwritten))
	if err != nil {
		return nil, nil, err
	}
	var superseded []SupersededExpiry
	var skipped []FailedExpiry
	for _, ex := range unwritten {
		id := ex.Purchase.ID()
		now, found := current[id]
		if found && now.Version == ex.PreviousVersion {
			skipped = append(skipped, FailedExpiry{PurchaseID: id,
				Err: fmt.Errorf("purchase %s at version %d was not updated: a trigger or rule skipped its row", id, ex.PreviousVersion)})
			continue
		}
		now.PurchaseID = id
		superseded = append(superseded, now)
	}
	return superseded, skipped, nil
}

// without is es less the expiries in out, in order.
func without(es, out []Expiry) []Expiry {
	if len(out) == 0 {
		return es
	}
	skip := make(map[uuid.UUID]bool, len(out))
	for _, ex := range out {
		skip[ex.Purchase.ID()] = true
	}
	kept := make([]Expiry, 0, len(es)-len(out))
	for _, ex := range es {
		if !skip[ex.Purchase.ID()] {
			kept = append(kept, ex)
		}
	}
	return kept
}

// ids are the expiries' purchase ids.
func ids(es []Expiry) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i, ex := range es {
		out[i] = ex.Purchase.ID()
	}
	return out
}
