package adapters_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// testHash is a well-formed request hash.
const testHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// repoBundle is the two repositories on a fresh database with one package.
type repoBundle struct {
	db        *testbed.Database
	purchases *adapters.PurchaseRepository
	packages  *adapters.PackageRepository
	pkg       *domain.Package
}

// add stores p as the purchase use case does, through Add's build step.
func (b *repoBundle) add(ctx context.Context, p *domain.Purchase, claim *app.IdempotencyRecord) error {
	if claim != nil && claim.CreatedAt.IsZero() {
		claim.CreatedAt = p.CreatedAt()
	}
	_, err := b.purchases.Add(ctx, p.PackageID(), claim, func(*domain.Package) (*domain.Purchase, error) { return p, nil })
	return err
}

func newRepoBundle(tb testing.TB) *repoBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	purchases, err := adapters.NewPurchaseRepository(db.Gorm, promotiontest.Publisher(tb, nil))
	require.NoError(tb, err)
	packages, err := adapters.NewPackageRepository(db.Gorm)
	require.NoError(tb, err)
	pkg, err := domain.NewPackage(uuid.New(), domain.PackageSpec{
		Code: "project-boost-week", Name: "Project boost", Kind: domain.PackageKindProjectBoost,
		DurationDays: 7, BoostWeight: 10, Amount: decimal.RequireFromString("1500.00"),
		CurrencyID: domain.CurrencyIDRUB, IsActive: true,
	}, time.Now())
	require.NoError(tb, err)
	require.NoError(tb, packages.Create(context.Background(), pkg))
	return &repoBundle{db: db, purchases: purchases, packages: packages, pkg: pkg}
}

func (b *repoBundle) newPurchase(tb testing.TB) *domain.Purchase {
	tb.Helper()
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: b.pkg,
		Targets: []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}}, Now: time.Now(),
	})
	require.NoError(tb, err)
	return p
}

// waitForLockWait polls until a session of the test database waits on a
// lock: the racing request has reached the row the first one holds.
func (b *repoBundle) waitForLockWait(tb testing.TB) {
	tb.Helper()
	b.db.WaitForLockWaiters(tb, 1)
}

// holdClaim runs Add's statement for a purchase under key for tenant in a
// transaction it holds open, the key claimed, as a concurrent request's
// statement is while it runs, until release receives the outcome: nil
// commits the purchase, an error rolls back.
func (b *repoBundle) holdClaim(tb testing.TB, tenant uuid.UUID, key string) (release chan error, done chan error) {
	tb.Helper()
	release, done, claimed := make(chan error), make(chan error, 1), make(chan struct{})
	first := b.newPurchase(tb)
	go func() {
		done <- postgres.InTx(context.Background(), b.db.Gorm, func(tx postgres.Tx) error {
			inserted, err := b.purchases.InsertIn(context.Background(), tx, b.pkg, first, &app.IdempotencyRecord{
				TenantID: tenant, Key: key, RequestHash: testHash, PurchaseID: first.ID(), CreatedAt: first.CreatedAt(),
			})
			if err != nil {
				return err
			}
			if !inserted {
				return errors.New("the first request's statement wrote nothing")
			}
			close(claimed)
			return <-release
		})
	}()
	select {
	case <-claimed:
	case err := <-done:
		tb.Fatalf("claim failed: %v", err)
	}
	return release, done
}

// addBehindClaim adds a second purchase under the key that holdClaim
// holds, and returns once that Add waits on the first claim's lock; added
// receives its outcome.
func (b *repoBundle) addBehindClaim(tb testing.TB, tenant uuid.UUID, key string) (second *domain.Purchase, added chan error) {
	tb.Helper()
	second = b.newPurchase(tb)
	added = make(chan error, 1)
	go func() {
		added <- b.add(context.Background(), second, &app.IdempotencyRecord{
			TenantID: tenant, Key: key, RequestHash: testHash, PurchaseID: second.ID(),
		})
	}()
	b.waitForLockWait(tb)
	return second, added
}

func TestAddWaitsForARacingClaimThatCommits(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	tenant := uuid.New()
	release, done := b.holdClaim(t, tenant, "k1")

	_, added := b.addBehindClaim(t, tenant, "k1")
	select {
	case err := <-added:
		t.Fatalf("Add returned while the key was held: %v", err)
	default:
	}

	release <- nil
	require.NoError(t, <-done)
	require.ErrorIs(t, <-added, app.ErrIdempotencyKeyTaken)
	require.Equal(t, 1, promotiontest.Count(t, b.db, "SELECT count(*) FROM promotion.promotion_purchases"), "the loser stored nothing")
	require.Equal(t, 1, promotiontest.OutboxCount(t, b.db))
}

func TestAddTakesAKeyWhoseHolderRolledBack(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	tenant := uuid.New()
	release, done := b.holdClaim(t, tenant, "k1")

	second, added := b.addBehindClaim(t, tenant, "k1")
	release <- errors.New("the first request failed")
	require.Error(t, <-done)
	require.NoError(t, <-added)

	rec, err := b.purchases.FindIdempotencyKey(context.Background(), tenant, "k1")
	require.NoError(t, err)
	require.Equal(t, second.ID(), rec.PurchaseID)
	require.Equal(t, 1, promotiontest.OutboxCount(t, b.db))
}

func TestSaveTransitionChecksTheVersion(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	p := b.newPurchase(t)
	require.NoError(t, b.add(ctx, p, nil))

	// Two readers of version 1; the first to write wins.
	first, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	second, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	require.NoError(t, first.Cancel("first", uuid.New(), time.Now()))
	require.NoError(t, second.Cancel("second", uuid.New(), time.Now()))

	save := func(q *domain.Purchase) error {
		return postgres.InTx(ctx, b.db.Gorm, func(tx postgres.Tx) error { return adapters.SaveTransition(b.purchases, ctx, tx, q, 1) })
	}
	require.NoError(t, save(first))
	err = save(second)
	require.ErrorIs(t, err, adapters.ErrVersionConflict)
	require.Equal(t, apperror.KindConflict, apperror.KindOf(err))

	stored, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	require.Equal(t, "first", stored.CancelReason())
	require.Equal(t, int64(2), stored.Version())
	require.Equal(t, 2, promotiontest.OutboxCount(t, b.db), "the loser published nothing")
}

func TestUpdatePurchaseRollsBackOnError(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	p := b.newPurchase(t)
	require.NoError(t, b.add(ctx, p, nil))

	boom := errors.New("boom")
	err := b.purchases.UpdatePurchase(ctx, p.ID(), func(q *domain.Purchase) error {
		require.NoError(t, q.Cancel("x", uuid.New(), time.Now()))
		return boom
	})
	require.ErrorIs(t, err, boom)

	err = b.purchases.UpdatePurchase(ctx, p.ID(), func(*domain.Purchase) error { return nil })
	require.NoError(t, err, "a closure that changes nothing writes nothing")

	stored, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	require.Equal(t, domain.StatusActive, stored.Status())
	require.Equal(t, int64(1), stored.Version())
	require.Equal(t, 1, promotiontest.OutboxCount(t, b.db))

	err = b.purchases.UpdatePurchase(ctx, uuid.New(), func(*domain.Purchase) error { return nil })
	require.ErrorIs(t, err, domain.ErrPurchaseNotFound)
}

func TestUpdatePurchaseStoresEveryField(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	p := b.newPurchase(t)
	require.NoError(t, b.add(ctx, p, nil))
	admin := uuid.New()
	var cancelled *domain.Purchase
	require.NoError(t, b.purchases.UpdatePurchase(ctx, p.ID(), func(q *domain.Purchase) error {
		cancelled = q
		return q.Cancel("reason", admin, time.Now())
	}))
	stored, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	require.Equal(t, cancelled, stored, "what was decided is what was stored")
	require.Equal(t, admin, stored.UpdatedByUserID())
}

func TestGetRoundTripsAPurchase(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: b.pkg, Now: time.Now(),
		Targets: []domain.TargetRef{
			{Kind: domain.TargetKindProject, ID: uuid.New()}, {Kind: domain.TargetKindProject, ID: uuid.New()},
			{Kind: domain.TargetKindProject, ID: uuid.New()},
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.add(ctx, p, nil))
	got, err := b.purchases.Get(ctx, p.ID())
	require.NoError(t, err)
	require.Equal(t, p.Targets(), got.Targets(), "targets come back in the buyer's order")
	require.True(t, p.Price().Equal(got.Price()))
	require.Equal(t, p.StartsAt(), got.StartsAt())
	require.Equal(t, p.EndsAt(), got.EndsAt())
	require.Equal(t, p.CreatedByUserID(), got.CreatedByUserID())

	_, err = b.purchases.Get(ctx, uuid.New())
	require.ErrorIs(t, err, domain.ErrPurchaseNotFound)
}

func TestPurchaseChangedMessage(t *testing.T) {
	t.Parallel()
	b := &repoBundle{}
	pkg, err := domain.NewPackage(uuid.New(), domain.PackageSpec{
		Code: "post-boost-week", Name: "Post", Kind: domain.PackageKindPostBoost, DurationDays: 7, BoostWeight: 3,
		Amount: decimal.RequireFromString("490"), CurrencyID: domain.CurrencyIDRUB, IsActive: true,
	}, time.Now())
	require.NoError(t, err)
	b.pkg = pkg
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: pkg, Now: time.Now(),
		Targets: []domain.TargetRef{{Kind: domain.TargetKindPost, ID: uuid.New()}},
	})
	require.NoError(t, err)
	require.NoError(t, p.Cancel("secret reason", uuid.New(), time.Now()))

	ctx := correlation.WithRunID(context.Background(), "run-7")
	msg, err := adapters.PurchaseChangedV1().Message(ctx, p, p.UpdatedAt(), uuid.Must(uuid.NewV7()))
	require.NoError(t, err)
	env, err := contract.Decode(msg.Payload, nil)
	require.NoError(t, err)
	require.Equal(t, env.MessageID.String(), msg.UUID)
	require.Equal(t, p.ID().String(), msg.Metadata.Get(kafka.MetaPartitionKey))
	require.Equal(t, contract.EventType, msg.Metadata.Get(kafka.MetaEventType))
	require.Equal(t, "1", msg.Metadata.Get(kafka.MetaContractVersion))
	require.Equal(t, "run-7", msg.Metadata.Get(kafka.MetaCorrelationID))
	require.Equal(t, contract.StatusCancelled, env.Payload.Status)
	require.Equal(t, contract.KindPostBoost, env.Payload.PackageKind)
	require.Equal(t, contract.TargetPost, env.Payload.Targets[0].TargetKind)
	require.Equal(t, "490.00", env.Payload.Price.Amount.StringFixed(2))
	require.Contains(t, string(msg.Payload), `"amount":490.00`)
	require.Equal(t, int64(2), env.Payload.Version)
	require.NotContains(t, string(msg.Payload), "secret reason")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(msg.Payload, &raw))
	require.NotContains(t, raw["payload"], "cancelReason")
}

// TestPurchaseChangedMessageRefusesPoison: a purchase the contract cannot
// express is an error, never a panic (the expiry job relies on it).
func TestPurchaseChangedMessageRefusesPoison(t *testing.T) {
	t.Parallel()
	base := domain.PurchaseFromDatabase{
		ID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "post-boost-week",
		PackageKind: domain.PackageKindPostBoost, BoostWeight: 3,
		Price:  domain.UnmarshalPriceFromDatabase(decimal.NewFromInt(1), domain.CurrencyIDRUB, domain.RUB),
		Status: domain.StatusActive, PaymentStatus: domain.PaymentNotRequired,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now(), CreatedAt: time.Now(), UpdatedAt: time.Now(), Version: 1,
		Targets: []domain.Target{domain.UnmarshalTargetFromDatabase(domain.TargetKindPost, uuid.New())},
	}
	for name, change := range map[string]func(*domain.PurchaseFromDatabase){
		"no targets": func(r *domain.PurchaseFromDatabase) { r.Targets = nil },
		"version 0":  func(r *domain.PurchaseFromDatabase) { r.Version = 0 },
		"kind not admitted": func(r *domain.PurchaseFromDatabase) {
			r.Targets = []domain.Target{domain.UnmarshalTargetFromDatabase(domain.TargetKindProject, uuid.New())}
		},
		"ends before start": func(r *domain.PurchaseFromDatabase) { r.EndsAt = r.StartsAt.Add(-time.Second) },
		"negative amount": func(r *domain.PurchaseFromDatabase) {
			r.Price = domain.UnmarshalPriceFromDatabase(decimal.NewFromInt(-1), domain.CurrencyIDRUB, domain.RUB)
		},
	} {
		r := base
		change(&r)
		p, err := domain.UnmarshalPurchaseFromDatabase(r)
		require.NoError(t, err, name)
		msg, err := adapters.PurchaseChangedV1().Message(context.Background(), p, time.Now(), uuid.Must(uuid.NewV7()))
		require.Error(t, err, name)
		require.Nil(t, msg, name)
	}
}

func TestDeleteIdempotencyKeysBefore(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	tenant := uuid.New()
	for i, age := range []time.Duration{0, 23 * time.Hour, 25 * time.Hour, 48 * time.Hour, 72 * time.Hour} {
		p := b.newPurchase(t)
		key := uuid.NewString()
		require.NoError(t, b.add(ctx, p, &app.IdempotencyRecord{
			TenantID: tenant, Key: key, RequestHash: testHash, PurchaseID: p.ID(),
		}))
		_, err := b.db.SQL.Exec(`UPDATE promotion.idempotency_keys SET created_at = now() - $1::interval WHERE key = $2`,
			age.String(), key)
		require.NoError(t, err, i)
	}
	n, err := b.purchases.DeleteIdempotencyKeysBefore(ctx, time.Now().Add(-24*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "a batch is bounded")

	deleted, err := app.NewForgetIdempotencyKeysHandler(b.purchases, nil).Handle(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), deleted)
	require.Equal(t, 2, promotiontest.Count(t, b.db, "SELECT count(*) FROM promotion.idempotency_keys"), "keys younger than 24h stay")
	require.Equal(t, 5, promotiontest.Count(t, b.db, "SELECT count(*) FROM promotion.promotion_purchases"), "purchases stay")
}

func TestPackageRepository(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()

	got, err := b.packages.Get(ctx, b.pkg.ID())
	require.NoError(t, err)
	require.Equal(t, b.pkg, got)

	_, err = b.packages.Get(ctx, uuid.New())
	require.ErrorIs(t, err, domain.ErrPackageNotFound)

	sameCode, err := domain.NewPackage(uuid.New(), domain.PackageSpec{
		Code: b.pkg.Code(), Name: "Other", Kind: domain.PackageKindPostBoost, DurationDays: 1, BoostWeight: 1,
		Amount: decimal.Zero, CurrencyID: domain.CurrencyIDRUB,
	}, time.Now())
	require.NoError(t, err)
	err = b.packages.Create(ctx, sameCode)
	require.Equal(t, apperror.KindConflict, apperror.KindOf(err), "a taken code is a conflict")

	created, err := b.packages.CreateIfCodeAbsent(ctx, sameCode)
	require.NoError(t, err)
	require.False(t, created)

	err = b.packages.UpdatePackage(ctx, uuid.New(), func(*domain.Package) error { return nil })
	require.ErrorIs(t, err, domain.ErrPackageNotFound)

	weight := 42
	require.NoError(t, b.packages.UpdatePackage(ctx, b.pkg.ID(), func(p *domain.Package) error {
		return p.Update(domain.PackageChanges{BoostWeight: &weight}, time.Now())
	}))
	got, err = b.packages.Get(ctx, b.pkg.ID())
	require.NoError(t, err)
	require.Equal(t, 42, got.BoostWeight())
	require.Equal(t, b.pkg.CreatedAt(), got.CreatedAt())
}

// With the package cached and no idempotency key, Add writes the purchase,
// its targets and its event in one statement: they commit together, and
// when the event cannot be stored nothing is.
func TestAddWithACachedPackageCommitsPurchaseAndEventTogether(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	require.NoError(t, b.add(ctx, b.newPurchase(t), nil)) // reads the package and caches it

	second := b.newPurchase(t)
	require.NoError(t, b.add(ctx, second, nil))
	stored, err := b.purchases.Get(ctx, second.ID())
	require.NoError(t, err)
	require.Equal(t, second.Targets(), stored.Targets())
	var sameTx bool
	require.NoError(t, b.db.SQL.QueryRow(`SELECT p.xmin = e.xmin
		FROM promotion.promotion_purchases AS p, promotion.promotion_purchase_targets AS t,
			outbox."pin_promotion_purchase_changed_v1" AS e
		WHERE p.id = $1 AND t.purchase_id = p.id AND e.metadata->>'partition_key' = p.id::text
			AND t.xmin = p.xmin`, second.ID()).Scan(&sameTx))
	require.True(t, sameTx, "purchase, targets and event in one transaction")

	b.refuseEvents(t)
	third := b.newPurchase(t)
	require.ErrorContains(t, b.add(ctx, third, nil), "event refused")
	_, err = b.purchases.Get(ctx, third.ID())
	require.ErrorIs(t, err, domain.ErrPurchaseNotFound, "the purchase was stored without its event")
	require.Equal(t, 2, promotiontest.OutboxCount(t, b.db))
}

// build runs at most twice, as app.PurchaseRepository promises: on the
// cached package, then on the package as read.
func TestAddRunsARefusingBuildTwiceAtMost(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	require.NoError(t, b.add(ctx, b.newPurchase(t), nil)) // caches the package
	refused := errors.New("targets refused")
	for _, claim := range []*app.IdempotencyRecord{nil, {TenantID: uuid.New(), Key: "k", RequestHash: testHash, PurchaseID: uuid.New(), CreatedAt: time.Now()}} {
		runs := 0
		_, err := b.purchases.Add(ctx, b.pkg.ID(), claim, func(*domain.Package) (*domain.Purchase, error) {
			runs++
			return nil, refused
		})
		require.ErrorIs(t, err, refused)
		require.Equal(t, 2, runs, "with claim %v", claim != nil)
	}
	require.Equal(t, 1, promotiontest.OutboxCount(t, b.db))
}

// The key's claim is part of the purchase's one statement: the key, the
// purchase and its event commit together, and an event the outbox refuses
// leaves the key free for the client's retry.
func TestAddClaimsTheKeyInThePurchasesTransaction(t *testing.T) {
	t.Parallel()
	b := newRepoBundle(t)
	ctx := context.Background()
	tenant := uuid.New()
	p := b.newPurchase(t)
	require.NoError(t, b.add(ctx, p, &app.IdempotencyRecord{TenantID: tenant, Key: "k1", RequestHash: testHash, PurchaseID: p.ID()}))
	var sameTx bool
	require.NoError(t, b.db.SQL.QueryRow(`SELECT k.xmin = p.xmin
		FROM promotion.idempotency_keys AS k JOIN promotion.promotion_purchases AS p ON p.id = k.purchase_id
		WHERE k.tenant_id = $1 AND k.key = 'k1'`, tenant).Scan(&sameTx))
	require.True(t, sameTx, "key and purchase in one transaction")

	b.refuseEvents(t)
	second := b.newPurchase(t)
	require.ErrorContains(t, b.add(ctx, second, &app.IdempotencyRecord{TenantID: tenant, Key: "k2", RequestHash: testHash, PurchaseID: second.ID()}),
		"event refused")
	rec, err := b.purchases.FindIdempotencyKey(ctx, tenant, "k2")
	require.NoError(t, err)
	require.Nil(t, rec, "the key was claimed for a purchase that was not stored")
	require.Equal(t, 1, promotiontest.Count(t, b.db, "SELECT count(*) FROM promotion.promotion_purchases"))
}

// Add builds on the package as committed: one that changes between Add's
// read and its statement is read again, and one that changes under both
// reads is a conflict to retry, with nothing stored.
func TestAddReadsAPackageThatChangedUnderItsStatementAgain(t *testing.T) {
	t.Parallel()
	for _, edits := range []int{1, 2} {
		b := newRepoBundle(t) // the package is not cached: Add reads it
		ctx := context.Background()
		runs := 0
		added, err := b.purchases.Add(ctx, b.pkg.ID(), nil, func(pkg *domain.Package) (*domain.Purchase, error) {
			runs++
			if runs <= edits { // an admin's edit commits between the read and the statement
				promotiontest.Exec(t, b.db, `UPDATE promotion.promotion_packages SET boost_weight = boost_weight + 1
					WHERE id = '`+b.pkg.ID().String()+`'`)
			}
			return domain.NewPurchase(domain.NewPurchaseParams{
				ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: pkg,
				Targets: []domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}}, Now: time.Now(),
			})
		})
		require.Equal(t, 2, runs, "edits %d", edits)
		if edits == 1 {
			require.NoError(t, err)
			require.Equal(t, b.pkg.BoostWeight()+1, added.BoostWeight(), "built on the package as edited")
			require.Equal(t, 1, promotiontest.OutboxCount(t, b.db))
			continue
		}
		var problem *apperror.Error
		require.ErrorAs(t, err, &problem)
		require.Equal(t, apperror.KindConflict, problem.Kind)
		require.Equal(t, "package-changed", problem.Slug)
		require.Zero(t, promotiontest.Count(t, b.db, "SELECT count(*) FROM promotion.promotion_purchases"))
		require.Zero(t, promotiontest.OutboxCount(t, b.db))
	}
}

// refuseEvents makes the outbox table refuse every event from now on.
func (b *repoBundle) refuseEvents(tb testing.TB) {
	tb.Helper()
	promotiontest.Exec(tb, b.db, `CREATE FUNCTION promotion.refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'event refused'; END $$`,
		`CREATE TRIGGER refuse_event BEFORE INSERT ON outbox."pin_promotion_purchase_changed_v1"
		FOR EACH ROW EXECUTE FUNCTION promotion.refuse_event()`)
}
