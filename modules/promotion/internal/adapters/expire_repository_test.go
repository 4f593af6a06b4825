package adapters

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gorm.io/gorm/schema"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
)

// Tests table, row "Empty batch": nothing due -> a successful no-op.
func TestExpireEmptyBatch(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertPurchases(t, 3, promotiontest.Purchases{})                               // Active, not due
	b.insertPurchases(t, 2, promotiontest.Purchases{Status: domain.StatusExpired})   // terminal
	b.insertPurchases(t, 2, promotiontest.Purchases{Status: domain.StatusCancelled}) // terminal
	b.makeDue(t, time.Hour, b.insertPurchases(t, 1, promotiontest.Purchases{Status: domain.StatusExpired})...)
	before := b.statusCounts(t)

	res := b.run(t, 200, 1)

	require.Zero(t, res.Expired)
	require.Zero(t, res.Failed)
	require.Zero(t, res.SkippedLocked)
	require.Equal(t, before, b.statusCounts(t))
	require.Empty(t, b.events(t))
	require.Len(t, b.logs.Records(t, "batch selected"), 1)
	require.EqualValues(t, 0, b.logs.Records(t, "batch selected")[0]["count"])
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_run_total"))
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_backlog"))
}

// Tests table, row "Срок истёк": an Active purchase past EndsAt becomes
// Expired with exactly one Expired event. The purchase is made through the
// real use cases.
func TestExpireDuePurchase(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	packages, err := NewPackageRepository(b.db.Gorm)
	require.NoError(t, err)
	application, err := app.New(app.Config{Purchases: purchases, Packages: packages})
	require.NoError(t, err)
	amount, currency := decimal.RequireFromString("1500.00"), domain.CurrencyIDRUB
	pkg, err := application.CreatePackage.Handle(b.ctx, app.CreatePackage{
		Code: "project-boost-week", Name: "Project boost, a week", Kind: string(domain.PackageKindProjectBoost),
		DurationDays: 7, BoostWeight: 10, Amount: &amount, CurrencyID: &currency,
	})
	require.NoError(t, err)
	buyer := app.Actor{UserID: uuid.New(), TenantID: uuid.New()}
	targets := []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}, {Kind: domain.TargetKindProject, ID: uuid.New()}}
	due, err := application.PurchasePromotion.Handle(b.ctx, app.PurchasePromotion{Actor: buyer, PackageID: pkg.ID(), Targets: targets})
	require.NoError(t, err)
	notDue, err := application.PurchasePromotion.Handle(b.ctx, app.PurchasePromotion{
		Actor: buyer, PackageID: pkg.ID(), Targets: []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}},
	})
	require.NoError(t, err)
	id := due.Purchase.ID()
	b.makeDue(t, time.Minute, id)
	eventsBefore := len(b.events(t))

	res := b.run(t, 200, 1)

	require.Equal(t, 1, res.Expired)
	require.Zero(t, res.Failed)
	require.Zero(t, res.SkippedLocked)
	require.Equal(t, res.AsOf, res.AsOf.UTC().Truncate(time.Microsecond), "AsOf is UTC in microseconds")
	row := b.row(t, id)
	require.Equal(t, "Expired", row.Status)
	require.EqualValues(t, 2, row.Version)
	require.True(t, row.UpdatedAt.Equal(res.AsOf), "updated_at %s, AsOf %s", row.UpdatedAt, res.AsOf)
	require.Equal(t, "Active", b.row(t, notDue.Purchase.ID()).Status)

	all := b.events(t)
	require.Len(t, all, eventsBefore+1, "exactly one new event")
	ev := all[len(all)-1]
	env := ev.Envelope
	require.Equal(t, contract.EventType, env.EventType)
	require.Equal(t, contract.ContractVersion, env.ContractVersion)
	require.Equal(t, id, env.AggregateID)
	require.Equal(t, contract.AggregateType, env.AggregateType)
	require.True(t, env.OccurredAt.Equal(res.AsOf), "occurredAt %s, AsOf %s", env.OccurredAt, res.AsOf)
	require.Equal(t, ev.MessageID, env.MessageID.String())
	p := env.Payload
	require.Equal(t, contract.StatusExpired, p.Status)
	require.EqualValues(t, 2, p.Version)
	require.Equal(t, id, p.PurchaseID)
	require.Equal(t, buyer.TenantID, p.TenantID)
	require.Equal(t, pkg.ID(), p.PackageID)
	require.Equal(t, "project-boost-week", p.PackageCode)
	require.Equal(t, contract.KindProjectBoost, p.PackageKind)
	require.Equal(t, contract.PaymentNotRequired, p.PaymentStatus)
	require.Equal(t, 10, p.BoostWeight)
	require.Equal(t, []contract.Target{
		{TargetKind: contract.TargetProject, TargetID: targets[0].ID},
		{TargetKind: contract.TargetProject, TargetID: targets[1].ID},
	}, p.Targets)
	require.True(t, p.Price.Amount.Equal(decimal.RequireFromString("1500")))
	require.EqualValues(t, 643, p.Price.CurrencyID)
	require.Equal(t, contract.Currency{IsoCode: "RUB", Name: "Российский рубль", Sign: "₽"}, p.Price.Currency)
	require.True(t, p.EndsAt.Before(res.AsOf))
	require.Equal(t, id.String(), ev.Metadata[kafka.MetaPartitionKey])
	require.Equal(t, res.RunID.String(), ev.Metadata[kafka.MetaCorrelationID], "correlation id = run id")

	// The log lines of the design document, each with the run id.
	runID := res.RunID.String()
	started := b.logs.Records(t, "cycle started")
	require.Len(t, started, 1)
	require.Equal(t, runID, started[0]["run_id"])
	require.NotEmpty(t, started[0]["as_of"])
	selected := b.logs.Records(t, "batch selected")
	require.Len(t, selected, 1)
	require.EqualValues(t, 1, selected[0]["count"])
	require.Equal(t, runID, selected[0]["run_id"])
	expired := b.logs.Records(t, "promotion expired")
	require.Len(t, expired, 1)
	require.Equal(t, id.String(), expired[0]["purchase_id"])
	require.Equal(t, buyer.TenantID.String(), expired[0]["tenant_id"])
	require.Equal(t, "ProjectBoost", expired[0]["package_kind"])
	require.EqualValues(t, 2, expired[0]["targets_count"])
	require.Equal(t, runID, expired[0]["run_id"])
	completed := b.logs.Records(t, "cycle completed")
	require.Len(t, completed, 1)
	require.EqualValues(t, 1, completed[0]["expired"])
	require.EqualValues(t, 0, completed[0]["skipped_locked"])
	require.EqualValues(t, 0, completed[0]["failed"])
	require.Contains(t, completed[0], "duration_ms")
	require.Equal(t, runID, completed[0]["run_id"])

	require.EqualValues(t, 1, b.metric(t, "promotion_expire_items_total", "outcome", "expired"))
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_items_total", "outcome", "failed"))
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_run_total"))
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_cycle_duration_seconds"))
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_backlog"))
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_errors_total"))

	// A second cycle finds nothing: Expired is terminal (INV-6).
	again := b.run(t, 200, 1)
	require.Zero(t, again.Expired)
	require.Len(t, b.events(t), eventsBefore+1)
}

// TestExpireEveryPaymentStatus: a due purchase expires whatever its
// payment stands at (every domain.PaymentStatus), and its event carries that
// payment status unchanged: expiry is about the period, not the payment.
func TestExpireEveryPaymentStatus(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, len(domain.PaymentStatuses))
	want := map[uuid.UUID]domain.PaymentStatus{}
	for i, payment := range domain.PaymentStatuses {
		_, err := b.db.SQL.ExecContext(b.ctx, `UPDATE promotion.promotion_purchases SET payment_status = $2 WHERE id = $1`,
			ids[i], string(payment))
		require.NoError(t, err)
		want[ids[i]] = payment
	}

	res := b.run(t, 200, 1)

	require.Equal(t, len(ids), res.Expired)
	require.Zero(t, res.Failed)
	events := b.expiredEvents(t)
	for id, payment := range want {
		require.Equal(t, "Expired", b.row(t, id).Status, "payment %s", payment)
		require.Len(t, events[id], 1, "payment %s", payment)
		require.EqualValues(t, payment, events[id][0].Envelope.Payload.PaymentStatus)
	}
}

// Spans: one per cycle with the run id, the batch's under it, and the
// outbox publication's under the batch's.
func TestExpireSpansNest(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertDue(t, 2)

	res := b.run(t, 200, 1)
	require.Equal(t, 2, res.Expired)

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range b.spans.Ended() {
		byName[s.Name()] = s
	}
	cycle, batch, publish := byName["expire-promotions.cycle"], byName["expire-promotions.batch"], byName["outbox publish "+contract.Topic]
	require.NotNil(t, cycle)
	require.NotNil(t, batch)
	require.NotNil(t, publish)
	require.Contains(t, cycle.Attributes(), attribute.String("pin.run_id", res.RunID.String()))
	require.Contains(t, batch.Attributes(), attribute.String("pin.run_id", res.RunID.String()))
	require.Equal(t, cycle.SpanContext().SpanID(), batch.Parent().SpanID())
	require.Equal(t, batch.SpanContext().SpanID(), publish.Parent().SpanID())
	require.Equal(t, cycle.SpanContext().TraceID(), publish.SpanContext().TraceID())

	// The run id on the publish span, the tenant of each item on the batch's.
	runID := attribute.String("pin.run_id", res.RunID.String())
	require.Contains(t, publish.Attributes(), runID)
	withTenant := 0
	for _, ev := range batch.Events() {
		for _, a := range ev.Attributes {
			if ev.Name == "promotion expired" && a.Key == "pin.tenant_id" && a.Value.AsString() != "" {
				withTenant++
			}
		}
	}
	require.Equal(t, 2, withTenant, "a span event with the tenant per expired item")
}

// Tests table, row "Partial failure": a purchase with no targets (its event
// cannot be built) is left out, logged and counted; the rest commits; the
// poison item is retried by the next cycle.
func TestExpirePoisonWithoutTargets(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 3)
	poison := ids[1]
	b.exec(t, fmt.Sprintf(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = '%s'`, poison))

	before := time.Now()
	res := b.run(t, 200, 1)

	require.Equal(t, 2, res.Expired)
	require.Equal(t, 1, res.Failed)
	completed := b.metric(t, "promotion_expire_last_completed_timestamp_seconds")
	require.InDelta(t, float64(time.Now().Unix()), completed, time.Since(before).Seconds()+1,
		"a cycle with poison items still completes")
	require.Equal(t, "Active", b.row(t, poison).Status)
	require.EqualValues(t, 1, b.row(t, poison).Version)
	require.Equal(t, "Expired", b.row(t, ids[0]).Status)
	require.Equal(t, "Expired", b.row(t, ids[2]).Status)
	events := b.expiredEvents(t)
	require.Len(t, events, 2)
	require.NotContains(t, events, poison)
	failed := b.logs.Records(t, "item failed")
	require.Len(t, failed, 1)
	require.Equal(t, "ERROR", failed[0]["level"])
	require.Equal(t, poison.String(), failed[0]["purchase_id"])
	require.Contains(t, failed[0]["error"], "no targets")
	require.Equal(t, res.RunID.String(), failed[0]["run_id"])
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_items_total", "outcome", "failed"))
	require.EqualValues(t, 2, b.metric(t, "promotion_expire_items_total", "outcome", "expired"))
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_errors_total"))
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_backlog"), "known poison is counted apart from the due work")
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_poison_purchases"), "the poison item is still due")

	// The next cycle tries it again.
	again := b.run(t, 200, 1)
	require.Zero(t, again.Expired)
	require.Equal(t, 1, again.Failed)
	require.Len(t, b.logs.Records(t, "item failed"), 2)

	// Once repaired, it expires like any other.
	b.exec(t, fmt.Sprintf(`INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
		VALUES ('%s', 'Project', '%s', 0)`, poison, uuid.New()))
	fixed := b.run(t, 200, 1)
	require.Equal(t, 1, fixed.Expired)
	require.Len(t, b.expiredEvents(t)[poison], 1)
}

// A poison item is not taken again by later batches of the same cycle, so
// a cycle with several batches ends.
func TestExpirePoisonNotRetakenWithinCycle(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 7)
	for _, id := range ids[:3] {
		b.exec(t, fmt.Sprintf(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = '%s'`, id))
	}

	res := b.run(t, 2, 0)

	require.Equal(t, 3, res.Failed)
	require.Equal(t, 4, res.Expired)
	require.Equal(t, 4, res.Batches, "2+2+2+1 rows")
	require.Len(t, b.logs.Records(t, "item failed"), 3)
}

// A row the database refuses to update (here a trigger raises for it) does
// not abort the batch: the set-based UPDATE fails, the batch falls back to a
// savepoint per row, and only that row is left out.
func TestExpireRowErrorIsolatedBySavepoints(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 5)
	bad := ids[2]
	b.failUpdatesOf(t, bad, "23514") // check_violation: the row's own data

	res := b.run(t, 200, 1)

	require.Equal(t, 4, res.Expired)
	require.Equal(t, 1, res.Failed)
	require.Equal(t, "Active", b.row(t, bad).Status)
	events := b.expiredEvents(t)
	require.Len(t, events, 4)
	require.NotContains(t, events, bad)
	for _, id := range ids {
		if id != bad {
			require.Equal(t, "Expired", b.row(t, id).Status)
			require.Len(t, events[id], 1)
		}
	}
	failed := b.logs.Records(t, "item failed")
	require.Len(t, failed, 1)
	require.Equal(t, bad.String(), failed[0]["purchase_id"])
	require.Contains(t, failed[0]["error"], "refused")
}

// An infrastructure error rolls the whole batch back: nothing changes, no
// event is stored, the locks are gone, and the next cycle does the work.
func TestExpireInfrastructureErrorRollsBackBatch(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 4)
	// 40001 (serialization failure) stands for an error that is not the
	// row's fault.
	b.failUpdatesOf(t, ids[3], "40001")

	res, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200, MaxBatchesPerCycle: 1}))

	require.Error(t, err)
	require.Zero(t, res.Expired)
	require.Equal(t, map[string]int{"Active": 4}, b.statusCounts(t))
	require.Empty(t, b.events(t))
	require.Len(t, b.logs.Records(t, "cycle failed"), 1)
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_errors_total"))
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_run_total"))
	b.requireUnlocked(t, ids...)

	b.exec(t, `DROP TRIGGER expire_test_fail ON promotion.promotion_purchases`)
	require.Equal(t, 4, b.run(t, 200, 1).Expired)
}

// requireUnlocked checks that no transaction holds the purchases' rows.
func (b *expireBundle) requireUnlocked(tb testing.TB, ids ...uuid.UUID) {
	tb.Helper()
	require.NoError(tb, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		var n int64
		return tx.GORM().Raw(`SELECT count(*) FROM (SELECT id FROM promotion.promotion_purchases
			WHERE id IN ? FOR UPDATE NOWAIT) AS locked`, ids).Scan(&n).Error
	}))
}

// A batch limit of several batches per cycle keeps taking full batches
// while the budget lasts; 1 takes one batch.
func TestExpireBatchesPerCycle(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertDue(t, 450)

	one := b.run(t, 100, 1)
	require.Equal(t, 100, one.Expired)
	require.Equal(t, 1, one.Batches)
	require.EqualValues(t, 350, b.metric(t, "promotion_expire_backlog"))

	two := b.run(t, 100, 2)
	require.Equal(t, 200, two.Expired)
	require.Equal(t, 2, two.Batches)

	rest := b.run(t, 100, 0)
	require.Equal(t, 150, rest.Expired)
	require.Equal(t, 2, rest.Batches, "a full batch, then a partial one that ends the cycle")
	require.Len(t, b.expiredEvents(t), 450)
	require.EqualValues(t, 0, b.metric(t, "promotion_expire_backlog"))
}

// Tests table, row "Duplicate / параллельные инстансы": three cycles at
// once over a backlog of 1000 expire each purchase exactly once, with
// exactly one Expired event each.
func TestExpireParallelInstances(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 1000)

	instance := func() (int, int, error) {
		res, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 50, MaxBatchesPerCycle: 1}))
		return res.Expired, res.SkippedLocked, err
	}
	total, skipped := promotiontest.DrainConcurrently(t, instance, instance, instance)
	require.Equal(t, 1000, total, "each purchase counted once")
	require.Equal(t, map[string]int{"Expired": 1000}, b.statusCounts(t))
	events := b.expiredEvents(t)
	require.Len(t, events, 1000)
	for _, id := range ids {
		require.Len(t, events[id], 1, "purchase %s", id)
		require.EqualValues(t, 2, events[id][0].Envelope.Payload.Version)
	}
	t.Logf("skipped-locked across the three instances: %d", skipped)
}

// blockingPurchases holds a cancellation inside its transaction, with the
// purchase row locked, until released: a cancellation in flight.
type blockingPurchases struct {
	*PurchaseRepository
	locked  chan struct{}
	release chan struct{}
}

func (r *blockingPurchases) UpdatePurchase(ctx context.Context, id uuid.UUID, update func(*domain.Purchase) error) error {
	return r.PurchaseRepository.UpdatePurchase(ctx, id, func(p *domain.Purchase) error {
		close(r.locked)
		<-r.release
		return update(p)
	})
}

// Tests table, row "Гонка с отменой менеджером", deterministic half: a
// purchase whose row a cancellation holds is skipped (and counted as
// skipped-locked); the cancellation then commits, and the job never
// touches the now terminal purchase.
func TestExpireSkipsPurchaseLockedByCancel(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 3)
	cancelled := ids[0]
	repo, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	blocking := &blockingPurchases{PurchaseRepository: repo, locked: make(chan struct{}), release: make(chan struct{})}
	packages, err := NewPackageRepository(b.db.Gorm)
	require.NoError(t, err)
	application, err := app.New(app.Config{Purchases: blocking, Packages: packages})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := application.CancelPromotion.Handle(b.ctx, app.CancelPromotion{
			Actor: app.Actor{UserID: uuid.New(), IsAdmin: true}, PurchaseID: cancelled, Reason: "delisted",
		})
		done <- err
	}()
	<-blocking.locked

	res := b.run(t, 200, 1)
	require.Equal(t, 2, res.Expired)
	require.Equal(t, 1, res.SkippedLocked)
	require.EqualValues(t, 1, b.metric(t, "promotion_expire_skip_locked_total"))
	require.EqualValues(t, 1, b.logs.Records(t, "cycle completed")[0]["skipped_locked"])

	close(blocking.release)
	require.NoError(t, <-done)
	require.Equal(t, "Cancelled", b.row(t, cancelled).Status)

	again := b.run(t, 200, 1)
	require.Zero(t, again.Expired)
	require.Zero(t, again.SkippedLocked)
	require.NotContains(t, b.expiredEvents(t), cancelled)
}

// Skipped-locked counts rows held by any other transaction (here a plain
// SELECT ... FOR UPDATE), only within the window the selection scanned.
func TestExpireSkippedLockedCount(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 6)
	// Order the purchases: ids[i] ended i minutes before an hour ago... so
	// ids[0] is the oldest.
	for i, id := range ids {
		b.makeDue(t, time.Hour+time.Duration(len(ids)-i)*time.Minute, id)
	}

	holder, err := b.db.SQL.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	// Hold the oldest and the newest.
	_, err = holder.ExecContext(b.ctx, `SELECT id FROM promotion.promotion_purchases WHERE id = ANY($1::uuid[]) FOR UPDATE`,
		uuidStrings([]uuid.UUID{ids[0], ids[5]}))
	require.NoError(t, err)

	// A full batch of 2 stops at ids[2]: ids[0] was skipped, ids[5] was
	// never reached.
	first := b.run(t, 2, 1)
	require.Equal(t, 2, first.Expired)
	require.Equal(t, 1, first.SkippedLocked)
	require.Equal(t, "Expired", b.row(t, ids[1]).Status)
	require.Equal(t, "Expired", b.row(t, ids[2]).Status)

	// A batch that is not full scanned every due row: both held rows count.
	rest := b.run(t, 10, 1)
	require.Equal(t, 2, rest.Expired)
	require.Equal(t, 2, rest.SkippedLocked)

	require.NoError(t, holder.Rollback())
	last := b.run(t, 10, 1)
	require.Equal(t, 2, last.Expired)
	require.Zero(t, last.SkippedLocked)
}

// Tests table, row "Гонка с отменой менеджером", racing half: cancellations
// through the use case race expiry cycles. Every purchase ends in exactly
// one terminal status, with exactly one terminal event that matches it.
func TestExpireRacesWithCancel(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 200)
	repo, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	packages, err := NewPackageRepository(b.db.Gorm)
	require.NoError(t, err)
	application, err := app.New(app.Config{Purchases: repo, Packages: packages})
	require.NoError(t, err)

	order := append([]uuid.UUID(nil), ids...)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	work := make(chan uuid.UUID, len(order))
	for _, id := range order {
		work <- id
	}
	close(work)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for range 4 { // managers cancelling
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				_, err := application.CancelPromotion.Handle(b.ctx, app.CancelPromotion{
					Actor: app.Actor{UserID: uuid.New(), IsAdmin: true}, PurchaseID: id, Reason: "race",
				})
				if err != nil && !errors.Is(err, domain.ErrPurchaseTerminal) {
					errs <- fmt.Errorf("cancel %s: %w", id, err)
				}
			}
		}()
	}
	var cycles sync.WaitGroup
	for range 2 { // two instances of the job
		cycles.Add(1)
		go func() {
			defer cycles.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, MaxBatchesPerCycle: 1})); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	cycles.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b.run(t, 200, 0) // whatever no one finished

	terminal := promotiontest.EventsByPurchase(b.events(t), contract.StatusExpired, contract.StatusCancelled)
	counts := b.statusCounts(t)
	require.Equal(t, 200, counts["Expired"]+counts["Cancelled"], "every purchase is terminal: %v", counts)
	for _, id := range ids {
		row := b.row(t, id)
		require.Len(t, terminal[id], 1, "purchase %s has one terminal event", id)
		require.Equal(t, row.Status, string(terminal[id][0].Envelope.Payload.Status), "the event matches the row")
		require.EqualValues(t, 2, row.Version)
		require.EqualValues(t, 2, terminal[id][0].Envelope.Payload.Version)
	}
	t.Logf("race outcome: %v", counts)
}

// Selection cost stays flat as terminal rows grow: the selection is served
// by the partial index, which holds Active rows only.
func TestExpireSelectionUsesPartialIndex(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertDue(t, 50)
	b.insertPurchases(t, 20, promotiontest.Purchases{})
	insertTerminal := func(n int) {
		b.exec(t, fmt.Sprintf(`INSERT INTO promotion.promotion_purchases
			(id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
			 currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
			 cancel_reason, created_by_user_id, created_at, updated_at, version)
		SELECT gen_random_uuid(), gen_random_uuid(), '%s', '%s', 'ProjectBoost', 10, 1500, 643,
			'RUB', 'Российский рубль', '₽',
			CASE WHEN g %% 2 = 0 THEN 'Expired' ELSE 'Cancelled' END, 'NotRequired',
			now() - interval '30 days' - g * interval '1 second', now() - interval '23 days' - g * interval '1 second',
			CASE WHEN g %% 2 = 0 THEN NULL ELSE 'test' END, gen_random_uuid(), now(), now(), 2
		FROM generate_series(1, %d) AS g`, b.pkg.ID, b.pkg.Code, n), `ANALYZE promotion.promotion_purchases`)
	}
	asOf := time.Now().UTC()
	explain := func() (plan string, buffers int) {
		var lines []string
		require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			rows, err := tx.QueryContext(b.ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+selectBatchQuery,
				pgx.NamedArgs{"as_of": asOf, "exclude": []string{}, "batch_limit": 200, "poison_retries": expiry.PoisonRetries(200, 1)})
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var l string
				if err := rows.Scan(&l); err != nil {
					return err
				}
				lines = append(lines, l)
			}
			return rows.Close()
		}))
		plan = strings.Join(lines, "\n")
		// The first Buffers line is the top node's: everything the
		// selection read.
		for _, l := range lines {
			if i := strings.Index(l, "shared hit="); i >= 0 {
				_, err := fmt.Sscanf(l[i:], "shared hit=%d", &buffers)
				require.NoError(t, err, l)
				break
			}
		}
		return plan, buffers
	}

	insertTerminal(5000)
	plan, small := explain()
	require.Contains(t, plan, "promotion_purchases_expiry_idx", plan)
	require.Contains(t, plan, "LockRows", plan)

	insertTerminal(20000)
	plan, large := explain()
	require.Contains(t, plan, "promotion_purchases_expiry_idx", plan)
	// expire_poison is small by nature (known poison only): a seq scan of
	// it is the planner's right choice; the purchases must not be scanned.
	require.NotContains(t, plan, "Seq Scan on promotion_purchases", plan)
	// The index pages read do not depend on the terminal rows (the heap
	// pages of the 50 due rows may move, so allow a little).
	require.LessOrEqual(t, large, small+5, "index scan buffers %d -> %d\n%s", small, large, plan)
	t.Logf("selection plan with 25000 terminal rows:\n%s", plan)
}

// BenchmarkExpireBatch200 measures one cycle of one full batch of 200 due
// purchases (a test cannot: under the race detector on a shared machine a
// bound loose enough never to fail would assert nothing):
// go test -run '^$' -bench ExpireBatch200 ./modules/promotion/internal/adapters/
// It also reports the Go process's CPU time per batch (go-cpu-ms/op), which
// a machine busy with other work inflates less than the wall time.
func BenchmarkExpireBatch200(b *testing.B) {
	bundle := newExpireBundle(b)
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		bundle.insertDue(b, 200)
		before := processCPU(b)
		b.StartTimer()
		res, err := bundle.cycle.Run(bundle.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200, MaxBatchesPerCycle: 1}))
		b.StopTimer()
		cpu += processCPU(b) - before
		b.StartTimer()
		if err != nil || res.Expired != 200 {
			b.Fatalf("expired %d, err %v", res.Expired, err)
		}
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "go-cpu-ms/op")
}

// processCPU is the user and system CPU time of this process so far.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selectDue scans purchaseColumns by hand; they must be every column of
// purchaseModel, in its order, or an event would miss a field.
func TestExpirePurchaseColumnsMatchModel(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(&purchaseModel{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	require.Equal(t, s.DBNames, purchaseColumns)
}

// Poison never holds healthy purchases back: 25 purchases whose targets
// were deleted fall due before 10 healthy ones, with batches of 10 and one
// batch per cycle. No cycle takes more than the batch size, poison retries
// included. Every healthy purchase is expired within 1+⌈25/(10-1)⌉ =
// 4 cycles (the first batch knows no poison; every later one keeps a place
// for a retry); the known poison is retried in that place and in what a
// batch leaves free, is still logged and counted at every try, and what
// the job knows survives a new process (a fresh repository and handler on
// the same database).
func TestExpirePoisonBacklogDoesNotBlockHealthy(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	const poisonN, healthyN, batch = 25, 10, 10
	poison := b.insertPurchases(t, poisonN, promotiontest.Purchases{})
	b.makeDue(t, 2*time.Hour, poison...)
	for _, id := range poison {
		b.exec(t, fmt.Sprintf(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = '%s'`, id))
	}
	healthy := b.insertPurchases(t, healthyN, promotiontest.Purchases{})
	b.makeDue(t, time.Hour, healthy...)

	cycles := 1 + (poisonN+batch-2)/(batch-1)
	failed := 0
	for i := range cycles {
		res := b.run(t, batch, 1)
		require.LessOrEqual(t, res.Expired+res.Failed, batch, "cycle %d: expired %d + failed %d", i+1, res.Expired, res.Failed)
		failed += res.Failed
	}
	for _, id := range healthy {
		require.Equal(t, "Expired", b.row(t, id).Status, "healthy purchase %s after %d cycles", id, cycles)
	}
	require.Len(t, b.expiredEvents(t), healthyN)
	require.Greater(t, failed, poisonN, "every poison once, and retried once a batch has room")
	require.Len(t, b.logs.Records(t, "item failed"), failed)
	require.EqualValues(t, failed, b.metric(t, "promotion_expire_items_total", "outcome", "failed"))
	require.EqualValues(t, poisonN, b.metric(t, "promotion_expire_poison_purchases"))
	var known, retried int
	require.NoError(t, b.db.SQL.QueryRowContext(b.ctx,
		`SELECT count(*), count(*) FILTER (WHERE failures = 2) FROM promotion.expire_poison`).Scan(&known, &retried))
	require.Equal(t, poisonN, known)
	require.Equal(t, failed-poisonN, retried, "the retry slot takes the least recently tried")

	// A new process: the known poison keeps its one place in a batch that
	// new healthy purchases would fill, and no more.
	fresh := b.insertDue(t, batch)
	store, err := NewExpireRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	cycle := promotiontest.ExpireCycle(t, promotiontest.ExpireBatches(t, store), telemetry.ExpireTelemetryDeps{})
	res, err := cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batch, MaxBatchesPerCycle: 1}))
	require.NoError(t, err)
	require.Equal(t, batch-1, res.Expired)
	require.Equal(t, 1, res.Failed, "one place kept for a retry")
	expired := 0
	for _, id := range fresh {
		if b.row(t, id).Status == "Expired" {
			expired++
		}
	}
	require.Equal(t, batch-1, expired, "the oldest due healthy ones")

	// Repaired and retried, a poison purchase expires and is forgotten,
	// beside the last fresh one.
	var oldest uuid.UUID
	require.NoError(t, b.db.SQL.QueryRowContext(b.ctx,
		`SELECT purchase_id FROM promotion.expire_poison ORDER BY last_attempt_at, purchase_id LIMIT 1`).Scan(&oldest))
	b.exec(t, fmt.Sprintf(`INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
		VALUES ('%s', 'Project', '%s', 0)`, oldest, uuid.New()))
	fixed := b.run(t, batch, 1)
	require.Equal(t, 2, fixed.Expired)
	require.Equal(t, "Expired", b.row(t, oldest).Status)
	require.EqualValues(t, poisonN-1, b.metric(t, "promotion_expire_poison_purchases"))
}

// The backlog gauge is the last cycle's count, not a query per scrape: 0
// before any cycle, then what the cycle left, unchanged by purchases that
// fall due while no cycle runs (PromotionExpireJobNotRunning tells a
// stopped job), and less by ExpiredCount after the next.
func TestExpireBacklogGaugeIsTheLastCyclesCount(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.insertDue(t, 7)
	b.insertPurchases(t, 2, promotiontest.Purchases{}) // not due yet
	require.Zero(t, b.metric(t, "promotion_expire_backlog"), "no cycle has counted yet")

	first := b.run(t, 3, 1)
	require.Equal(t, 3, first.Expired)
	require.Equal(t, &expiry.ExpireBacklog{Due: 4}, first.Backlog)
	require.EqualValues(t, 4, b.metric(t, "promotion_expire_backlog"))
	b.insertDue(t, 5)
	require.EqualValues(t, 4, b.metric(t, "promotion_expire_backlog"), "a scrape runs no query")

	rest := b.run(t, 200, 1)
	require.Equal(t, 9, rest.Expired)
	require.Zero(t, b.metric(t, "promotion_expire_backlog"), "less by ExpiredCount")
}

// A batch larger than one write statement (ExpireWriteChunk) is written by
// several statements in its one transaction: every purchase expires with
// one event; a row refused in the second statement rolls back the first's
// too, and the redo row by row sets that row alone aside.
func TestExpireBatchWrittenInChunks(t *testing.T) {
	t.Parallel()
	n := ExpireWriteChunk + 5

	t.Run("healthy", func(t *testing.T) {
		t.Parallel()
		b := newExpireBundle(t)
		b.insertDue(t, n)
		var writes int
		b.ctx = postgres.WithStatementObserver(b.ctx, func(query string, _ []any) {
			if query == transitionQuery {
				writes++
			}
		})

		res := b.run(t, n, 1)

		require.Equal(t, n, res.Expired)
		require.Equal(t, 2, writes, "one write statement per %d purchases", ExpireWriteChunk)
		events := b.expiredEvents(t)
		require.Len(t, events, n)
		for id, evs := range events {
			require.Len(t, evs, 1, "purchase %s", id)
		}
	})

	t.Run("a row refused in the second statement", func(t *testing.T) {
		t.Parallel()
		b := newExpireBundle(t)
		ids := b.insertDue(t, n)
		bad := ids[n-2]
		b.failUpdatesOf(t, bad, "23514")

		res := b.run(t, n, 1)

		require.Equal(t, n-1, res.Expired)
		require.Equal(t, 1, res.Failed)
		require.Equal(t, 1, res.Batches)
		require.Equal(t, "Active", b.row(t, bad).Status)
		events := b.expiredEvents(t)
		require.Len(t, events, n-1)
		for id, evs := range events {
			require.NotEqual(t, bad, id)
			require.Len(t, evs, 1, "purchase %s", id)
		}
	})
}
