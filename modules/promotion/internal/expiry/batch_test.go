package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// memoryBatch is the I/O of an expiry batch in memory: it stands in for
// PostgreSQL only in these tests of the batch's policy (what is retried
// alone, what becomes poison, when to reread); the adapters' tests run the
// statements against PostgreSQL.
type memoryBatch struct {
	rows        []expiry.LockedPurchase
	refuseSet   bool                 // the set-based write is refused as a row's
	refuseRow   map[uuid.UUID]string // WriteOne refuses these, with this Refusal
	passedOver  map[uuid.UUID]bool   // the version guard passes these over
	current     map[uuid.UUID]expiry.SupersededExpiry
	transitions int // transactions begun

	// What the last committed transaction stored.
	written, forgotten []uuid.UUID
	poison             []expiry.FailedExpiry
}

func (m *memoryBatch) InBatch(_ context.Context, fn func(expiry.ExpireTx) error) error {
	m.transitions++
	tx := &memoryTx{m: m}
	if err := fn(tx); err != nil {
		return err // rolled back: nothing of tx is kept
	}
	m.written, m.forgotten, m.poison = tx.written, tx.forgotten, tx.poison
	return nil
}

func (m *memoryBatch) CountBacklog(context.Context, time.Time) (expiry.ExpireBacklog, error) {
	return expiry.ExpireBacklog{}, nil
}

func (m *memoryBatch) RecordCycle(context.Context, expiry.ExpireCycleResult, error) error { return nil }

type memoryTx struct {
	m                  *memoryBatch
	written, forgotten []uuid.UUID
	poison             []expiry.FailedExpiry
}

func (t *memoryTx) Select(context.Context, expiry.ExpireBatch) (expiry.ExpireSelection, error) {
	sel := expiry.ExpireSelection{}
	for _, r := range t.m.rows {
		p := *r.Purchase // each transaction loads the row afresh
		sel.Locked = append(sel.Locked, expiry.LockedPurchase{Purchase: &p, Retry: r.Retry})
		if r.Retry {
			sel.Retried++
		}
	}
	return sel, nil
}

func (t *memoryTx) Prepare(_ context.Context, es []expiry.Expiry) ([]expiry.Expiry, []expiry.FailedExpiry) {
	return es, nil
}

func (t *memoryTx) WriteAll(_ context.Context, es []expiry.Expiry, forgetPoison bool) ([]expiry.Expiry, error) {
	if t.m.refuseSet {
		return nil, &expiry.RowRefusal{Err: errors.New("a check constraint refused a row")}
	}
	var unwritten []expiry.Expiry
	for _, ex := range es {
		if t.m.passedOver[ex.Purchase.ID()] {
			unwritten = append(unwritten, ex)
			continue
		}
		t.written = append(t.written, ex.Purchase.ID())
		if forgetPoison {
			t.forgotten = append(t.forgotten, ex.Purchase.ID())
		}
	}
	return unwritten, nil
}

func (t *memoryTx) WriteOne(_ context.Context, ex expiry.Expiry) (bool, error) {
	if refusal, ok := t.m.refuseRow[ex.Purchase.ID()]; ok {
		return false, &expiry.RowRefusal{Refusal: refusal, Err: fmt.Errorf("refused: %s", refusal)}
	}
	if t.m.passedOver[ex.Purchase.ID()] {
		return false, nil
	}
	t.written = append(t.written, ex.Purchase.ID())
	return true, nil
}

func (t *memoryTx) ForgetPoison(_ context.Context, ids []uuid.UUID) error {
	t.forgotten = append(t.forgotten, ids...)
	return nil
}

func (t *memoryTx) Reread(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]expiry.SupersededExpiry, error) {
	out := map[uuid.UUID]expiry.SupersededExpiry{}
	for _, id := range ids {
		if s, ok := t.m.current[id]; ok {
			out[id] = s
		}
	}
	return out, nil
}

func (t *memoryTx) RememberPoison(_ context.Context, _ time.Time, failed []expiry.FailedExpiry) error {
	t.poison = append(t.poison, failed...)
	return nil
}

// duePurchases are n Active purchases that ended an hour before asOf.
func duePurchases(tb testing.TB, asOf time.Time, n int) []expiry.LockedPurchase {
	tb.Helper()
	out := make([]expiry.LockedPurchase, n)
	for i := range out {
		out[i] = expiry.LockedPurchase{Purchase: promotiontest.ActivePurchase(tb, asOf.Add(-time.Hour))}
	}
	return out
}

func expireBatch(tb testing.TB, m *memoryBatch, asOf time.Time) (expiry.ExpireBatchResult, error) {
	tb.Helper()
	batches, err := expiry.NewExpireBatches(m)
	require.NoError(tb, err)
	return batches.ExpireBatch(context.Background(), expiry.ExpireBatch{AsOf: asOf, Limit: 10,
		Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})
}

func idsOf(fs []expiry.FailedExpiry) []uuid.UUID {
	out := make([]uuid.UUID, len(fs))
	for i, f := range fs {
		out[i] = f.PurchaseID
	}
	return out
}

// A refusal of the set-based write that may be a row's is redone row by
// row in a new transaction: only the refused row becomes poison, with its
// refusal; the others commit, and their poison records are forgotten.
func TestExpireBatchRedoesARefusedSetRowByRow(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := duePurchases(t, asOf, 3)
	bad := rows[1].Purchase.ID()
	m := &memoryBatch{rows: rows, refuseSet: true, refuseRow: map[uuid.UUID]string{bad: "23514 promotion_purchases x"}}

	res, err := expireBatch(t, m, asOf)
	require.NoError(t, err)
	require.Equal(t, 2, m.transitions, "the set-based try, then the redo")
	require.Len(t, res.Expired, 2)
	require.Equal(t, []uuid.UUID{bad}, idsOf(res.Failed))
	require.Equal(t, "23514 promotion_purchases x", res.Failed[0].Refusal)
	require.Equal(t, []uuid.UUID{bad}, idsOf(m.poison))
	require.Equal(t, []uuid.UUID{rows[0].Purchase.ID(), rows[2].Purchase.ID()}, m.written)
	require.Equal(t, m.written, m.forgotten)
}

// Every due row refused alike is a fault of the schema: the batch fails
// and nothing, not even poison, is kept. Known poison retried does not
// count, and a different refusal keeps the rows as poison.
func TestExpireBatchFailsWhenEveryDueRowIsRefusedAlike(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := duePurchases(t, asOf, 3)
	rows[2].Retry = true
	alike := map[uuid.UUID]string{rows[0].Purchase.ID(): "23514 t c", rows[1].Purchase.ID(): "23514 t c"}
	m := &memoryBatch{rows: rows, refuseSet: true, refuseRow: alike}

	_, err := expireBatch(t, m, asOf)
	var refusedAlike *expiry.RefusedAlikeError
	require.ErrorAs(t, err, &refusedAlike)
	require.Equal(t, 2, refusedAlike.Rows)
	require.Empty(t, m.poison)

	alike[rows[1].Purchase.ID()] = "23502 t other"
	res, err := expireBatch(t, m, asOf)
	require.NoError(t, err)
	require.Len(t, res.Failed, 2)
	require.Equal(t, []uuid.UUID{rows[2].Purchase.ID()}, m.written)
}

// A row the version guard passed over is reread: moved on (or gone), it
// lost a race and is superseded; still at its version, a trigger or rule
// skipped it, and it is poison.
func TestExpireBatchRereadsWhatTheGuardPassedOver(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := duePurchases(t, asOf, 4)
	raced, gone, skipped := rows[0].Purchase.ID(), rows[1].Purchase.ID(), rows[2].Purchase.ID()
	m := &memoryBatch{rows: rows,
		passedOver: map[uuid.UUID]bool{raced: true, gone: true, skipped: true},
		current: map[uuid.UUID]expiry.SupersededExpiry{
			raced:   {PurchaseID: raced, Status: domain.StatusCancelled, Version: 4},
			skipped: {PurchaseID: skipped, Status: domain.StatusActive, Version: 3},
		}}

	res, err := expireBatch(t, m, asOf)
	require.NoError(t, err)
	require.Equal(t, 1, m.transitions, "no refusal, no redo")
	require.Equal(t, []expiry.SupersededExpiry{{PurchaseID: raced, Status: domain.StatusCancelled, Version: 4}, {PurchaseID: gone}},
		res.Superseded)
	require.Equal(t, []uuid.UUID{skipped}, idsOf(res.Failed))
	require.Equal(t, []uuid.UUID{rows[3].Purchase.ID()}, m.written)
	require.Equal(t, []uuid.UUID{skipped}, idsOf(m.poison))
}

// A transition that fails or panics is that purchase's poison; the batch
// goes on with the rest.
func TestExpireBatchKeepsAFailedTransitionAsPoison(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := duePurchases(t, asOf, 3)
	failing, panicking := rows[0].Purchase.ID(), rows[1].Purchase.ID()
	m := &memoryBatch{rows: rows}
	batches, err := expiry.NewExpireBatches(m)
	require.NoError(t, err)

	res, err := batches.ExpireBatch(context.Background(), expiry.ExpireBatch{AsOf: asOf, Limit: 10,
		Expire: func(p *domain.Purchase) error {
			switch p.ID() {
			case failing:
				return errors.New("no")
			case panicking:
				panic("boom")
			}
			return p.Expire(asOf)
		}})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{failing, panicking}, idsOf(res.Failed))
	require.ErrorContains(t, res.Failed[1].Err, "panic")
	require.Equal(t, []uuid.UUID{rows[2].Purchase.ID()}, m.written)
}
