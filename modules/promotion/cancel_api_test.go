package promotion_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

func TestCancelPublishesCancelled(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 2)

	res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant),
		body: map[string]any{"reason": "  the campaign was moved  "}, header: map[string]string{"X-Request-ID": "req-cancel-1"}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var p purchaseJSON
	res.decode(t, &p)
	require.Equal(t, "Cancelled", p.Status)
	require.Equal(t, int64(2), p.Version)
	require.NotNil(t, p.CancelReason)
	require.Equal(t, "the campaign was moved", *p.CancelReason)
	require.True(t, p.UpdatedAt.After(bought.UpdatedAt) || p.UpdatedAt.Equal(bought.UpdatedAt))
	require.Equal(t, bought.StartsAt, p.StartsAt)
	require.Equal(t, bought.EndsAt, p.EndsAt)

	events := b.events(t)
	require.Len(t, events, 2)
	ev := events[1]
	require.Equal(t, contract.StatusCancelled, ev.Envelope.Payload.Status)
	require.Equal(t, int64(2), ev.Envelope.Payload.Version)
	require.Equal(t, p.UpdatedAt, ev.Envelope.OccurredAt)
	require.Equal(t, bought.ID, ev.Metadata["partition_key"])
	require.Equal(t, "req-cancel-1", ev.Metadata["correlation_id"])
	require.NotEqual(t, events[0].Envelope.MessageID, ev.Envelope.MessageID)
	require.NotContains(t, string(ev.Raw), "campaign", "the cancel reason never goes into the event")
	require.Len(t, ev.Envelope.Payload.Targets, 2)

	var updatedBy uuid.NullUUID
	require.NoError(t, b.db.SQL.QueryRow(`SELECT updated_by_user_id FROM promotion.promotion_purchases WHERE id = $1`, bought.ID).Scan(&updatedBy))
	require.True(t, updatedBy.Valid, "the cancelling user is recorded")

	// INV-6: nothing leaves Cancelled.
	again := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: map[string]any{"reason": "again"}})
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "https://pin.dev/problems/purchase-terminal", again.problem(t).Type)
	require.Len(t, b.events(t), 2)
}

func TestCancelExpiredIsConflict(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)
	// What the expiry job would have done.
	b.exec(t, `UPDATE promotion.promotion_purchases SET status = 'Expired', version = 2,
		starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days' WHERE id = $1`, bought.ID)

	res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: map[string]any{"reason": "late"}})
	require.Equal(t, http.StatusConflict, res.status)
	res.problem(t)
	var status string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT status FROM promotion.promotion_purchases WHERE id = $1`, bought.ID).Scan(&status))
	require.Equal(t, "Expired", status)
	require.Len(t, b.events(t), 1)
}

// TestCancelOfAPurchaseABatchHoldsIsBusy holds a purchase's row (FOR
// UPDATE, uncommitted) beyond what an expiry batch within its bounds may
// (a lock held by hand): after its 7 s wait the cancellation gets 409
// purchase-busy, not "already Expired", and changes nothing
// (docs/expire-promotions-job.md, Guarantees; ADR 0014 decision 8).
func TestCancelOfAPurchaseABatchHoldsIsBusy(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)
	batch, err := b.db.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	defer func() { _ = batch.Rollback() }()
	_, err = batch.Exec(`SELECT id FROM promotion.promotion_purchases WHERE id = $1 FOR UPDATE SKIP LOCKED`, bought.ID)
	require.NoError(t, err)

	res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: map[string]any{"reason": "blocked"}})
	require.Equal(t, http.StatusConflict, res.status, string(res.body))
	require.Equal(t, "https://pin.dev/problems/purchase-busy", res.problem(t).Type)
	require.NoError(t, batch.Rollback())
	var status string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT status FROM promotion.promotion_purchases WHERE id = $1`, bought.ID).Scan(&status))
	require.Equal(t, "Active", status, "nothing changed")
	require.Len(t, b.events(t), 1)
}

func TestCancelReasonRules(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)

	for name, body := range map[string]any{
		"missing":  map[string]any{},
		"empty":    map[string]any{"reason": ""},
		"blank":    map[string]any{"reason": "   "},
		"too long": map[string]any{"reason": strings.Repeat("я", 501)},
	} {
		res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: body})
		require.Equal(t, http.StatusUnprocessableEntity, res.status, name)
		require.Equal(t, []string{"reason"}, res.problem(t).fields(), name)
	}
	for name, body := range map[string]string{"no body": "", "reason a number": `{"reason":5}`, "unknown field": `{"why":"x"}`} {
		res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: body})
		require.Equal(t, http.StatusBadRequest, res.status, name)
	}
	require.Len(t, b.events(t), 1, "no failed cancellation wrote an event")

	res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant),
		body: map[string]any{"reason": strings.Repeat("я", 500)}})
	require.Equal(t, http.StatusOK, res.status)
}

func TestConcurrentCancelsOneWins(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	token := b.tenantToken(t, tenant)

	for range 3 {
		bought := b.buy(t, token, pkg.ID, 1)
		var (
			mu       sync.Mutex
			statuses = map[int]int{}
		)
		parallel(4, func(i int) {
			tok := token
			if i%2 == 1 {
				tok = b.adminToken(t)
			}
			res := b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: tok, body: map[string]any{"reason": "race"}})
			mu.Lock()
			defer mu.Unlock()
			statuses[res.status]++
		})
		require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: 3}, statuses)
	}
	events := b.events(t)
	require.Len(t, events, 6, "per purchase exactly one Active and one Cancelled event")
	perPurchase := map[uuid.UUID][]int64{}
	for _, ev := range events {
		perPurchase[ev.Envelope.AggregateID] = append(perPurchase[ev.Envelope.AggregateID], ev.Envelope.Payload.Version)
	}
	for id, versions := range perPurchase {
		require.Equal(t, []int64{1, 2}, versions, id)
	}
}

func TestPurchaseWithoutTargetsStaysReadable(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 2)
	// How black-box tests make a poison purchase.
	b.exec(t, `DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = $1`, bought.ID)

	res := b.do(t, request{method: http.MethodGet, path: purchasePath(bought.ID), token: b.tenantToken(t, tenant)})
	require.Equal(t, http.StatusOK, res.status)
	var p purchaseJSON
	res.decode(t, &p)
	require.Empty(t, p.Targets)

	// Its Cancelled event cannot be built, so the cancellation is refused
	// whole: no status change without its event.
	res = b.do(t, request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant), body: map[string]any{"reason": "x"}})
	require.Equal(t, http.StatusInternalServerError, res.status)
	require.NotContains(t, string(res.body), "targets", "the cause stays in the log")
	var status string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT status FROM promotion.promotion_purchases WHERE id = $1`, bought.ID).Scan(&status))
	require.Equal(t, "Active", status)
	require.Len(t, b.events(t), 1)
}
