package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// ErrVersionConflict means a purchase row no longer had the version it was
// loaded with when its change was written: someone else changed it first.
var ErrVersionConflict = errors.New("purchase version conflict")

// lockTimeout bounds how long a cancellation waits for a purchase row that
// another transaction holds (an expiry batch holds its rows until it
// commits): past it the request gets a 409 to retry. It is the API pool's
// lock_timeout, set here too for callers on another pool.
var lockTimeout = fmt.Sprintf("%dms", postgres.APILockTimeout.Milliseconds())

// PurchaseRepository stores purchases in promotion.promotion_purchases and
// .promotion_purchase_targets, and puts the purchase-changed event of every
// write into the outbox of each of its publications in the same transaction.
type PurchaseRepository struct {
	db     *gorm.DB
	outbox *outbox.Publisher
	events Publications
	// packages are guesses of the packages purchases are built from.
	packages packageCache
}

var _ app.PurchaseRepository = (*PurchaseRepository)(nil)

// NewPurchaseRepository returns the repository. It publishes each event to
// publications, PurchaseChangedV1 alone when none is given.
func NewPurchaseRepository(db *gorm.DB, publisher *outbox.Publisher, publications ...Publication) (*PurchaseRepository, error) {
	if db == nil || publisher == nil {
		return nil, errors.New("adapters: purchase repository needs a database and an outbox publisher")
	}
	events, err := publicationsOrV1(publications)
	if err != nil {
		return nil, err
	}
	return &PurchaseRepository{db: db, outbox: publisher, events: events}, nil
}

// Add stores a new purchase and its event in one transaction, claiming the
// idempotency key first when claim is not nil. The claim is an INSERT ... ON
// CONFLICT DO NOTHING: PostgreSQL makes a racing claim of the same key wait
// until the first transaction ends, and then either insert (the first rolled
// back) or find the conflict (it committed) — in which case Add stores
// nothing and returns app.ErrIdempotencyKeyTaken. The package is locked FOR
// SHARE by the statement that inserts the purchase, which writes nothing
// unless the package still is the one the purchase was built from: a
// deactivation (or any edit) that holds it makes the purchase wait and then
// see its result, and one that comes later waits for the purchase to commit
// (ADR-0004). The purchase is built from the cached package when there is
// one; when that guess is stale, or build rejects it, the package is read
// (FOR SHARE) and build runs again on what was read.
func (r *PurchaseRepository) Add(ctx context.Context, packageID uuid.UUID, claim *app.IdempotencyRecord,
	build func(*domain.Package) (*domain.Purchase, error)) (*domain.Purchase, error) {
	triedCached := false // build has run on the cached package: not again
	if claim == nil {
		p, tried, err := r.addInOneStatement(ctx, packageID, build)
		if p != nil || err != nil {
			return p, err
		}
		triedCached = tried
	}
	var added *domain.Purchase
	err := postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		if claim != nil {
			row := toDBIdempotencyKey(claim)
			res := tx.DB.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "key"}},
				DoNothing: true,
			}).Create(&row)
			if res.Error != nil {
				return fmt.Errorf("claim idempotency key: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				return app.ErrIdempotencyKeyTaken
			}
		}
		if cached := r.packages.get(packageID); cached != nil && !triedCached {
			if p, err := build(cached); err == nil {
				inserted, err := insertPurchase(ctx, tx, cached, p)
				if err != nil {
					return err
				}
				if inserted {
					added = p
					return r.publish(ctx, tx, p)
				}
				r.packages.forget(packageID)
			}
		}
		pkg, err := getPackage(selectPackages(tx.DB).Clauses(clause.Locking{
			Strength: clause.LockingStrengthShare, Table: clause.Table{Name: "p"},
		}), packageID)
		if errors.Is(err, domain.ErrPackageNotFound) {
			pkg, err = nil, nil // build reports it as a packageId error
		}
		if err != nil {
			return err
		}
		r.packages.put(pkg)
		p, err := build(pkg)
		if err != nil {
			return err
		}
		if pkg == nil || !pkg.IsActive() {
			return fmt.Errorf("insert purchase %s: package %s is missing or inactive, yet build admitted it", p.ID(), packageID)
		}
		inserted, err := insertPurchase(ctx, tx, pkg, p)
		if err != nil {
			return err
		}
		if !inserted {
			return fmt.Errorf("insert purchase %s: package %s changed under its share lock", p.ID(), packageID)
		}
		added = p
		return r.publish(ctx, tx, p)
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// addInOneStatement is Add without an idempotency key when the package is
// cached and build admits the purchase: the purchase, its targets and its
// events are written by one statement, which PostgreSQL runs as one
// transaction — one round trip instead of four, and the event is built
// before a connection is taken. It returns nil, having written nothing,
// when there is no cached package, build refuses it, or the package's row
// no longer equals it; Add then takes its transaction. tried says whether
// build ran on the cached package.
func (r *PurchaseRepository) addInOneStatement(ctx context.Context, packageID uuid.UUID,
	build func(*domain.Package) (*domain.Purchase, error)) (_ *domain.Purchase, tried bool, _ error) {
	cached := r.packages.get(packageID)
	if cached == nil {
		return nil, false, nil
	}
	p, err := build(cached)
	if err != nil {
		return nil, true, nil // the package Add reads in its transaction decides
	}
	msgs, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return nil, true, err
	}
	bs, err := r.events.ready(ctx, r.outbox, msgs)
	if err != nil {
		return nil, true, fmt.Errorf("publish purchase-changed of %s: %w", p.ID(), err)
	}
	events, args := bs.ctes("purchase", insertPurchaseArgs(cached, p))
	var n int
	err = r.db.WithContext(ctx).Statement.ConnPool.QueryRowContext(ctx,
		insertPurchaseCTEs+events+"\nSELECT count(*) FROM purchase", args...).Scan(&n)
	if err := bs.done(err); err != nil {
		return nil, true, fmt.Errorf("insert purchase %s: %w", p.ID(), err)
	}
	if n != 1 {
		r.packages.forget(packageID)
		return nil, true, nil
	}
	return p, true, nil
}

// insertPurchaseCTEs insert a purchase and its targets, and only if the
// package row, locked FOR SHARE, still equals the active package the
// purchase was built from ($1..$10; insertPurchaseArgs); the CTE purchase
// holds the inserted id, or nothing. The purchase's values follow in the
// order of purchaseColumns, then its targets as three arrays.
var insertPurchaseCTEs = func() string {
	const pkgParams = 10
	values := make([]string, len(purchaseColumns))
	for i := range values {
		values[i] = fmt.Sprintf("$%d", pkgParams+1+i)
	}
	t := pkgParams + len(purchaseColumns) + 1
	return `WITH pkg AS (
	SELECT FROM ` + packagesTable + ` AS p JOIN ` + currenciesTable + ` AS c ON c.id = p.currency_id
	WHERE p.id = $1 AND p.is_active AND p.code = $2 AND p.kind = $3 AND p.duration_days = $4
		AND p.boost_weight = $5 AND p.price_amount = $6 AND p.currency_id = $7
		AND c.iso_code = $8 AND c.name = $9 AND c.sign = $10
	FOR SHARE OF p
), purchase AS (
	INSERT INTO ` + purchasesTable + ` (` + strings.Join(purchaseColumns, ", ") + `)
	SELECT ` + strings.Join(values, ", ") + ` FROM pkg
	RETURNING id
), targets AS (
	INSERT INTO ` + purchaseTargetsTable + ` (purchase_id, target_kind, target_id, position)
	SELECT purchase.id, t.kind, t.id, t.position
	FROM purchase, unnest(` + fmt.Sprintf("$%d::text[], $%d::uuid[], $%d::smallint[]", t, t+1, t+2) + `) AS t(kind, id, position)
)`
}()

// insertPurchase inserts p, built from pkg, with its targets inside tx, in
// one round trip. It reports false, having written nothing, when the
// package's row no longer equals pkg; either way the row stays share-locked
// until tx ends.
func insertPurchase(ctx context.Context, tx postgres.Tx, pkg *domain.Package, p *domain.Purchase) (bool, error) {
	var n int
	err := tx.DB.Statement.ConnPool.QueryRowContext(ctx, insertPurchaseCTEs+"\nSELECT count(*) FROM purchase",
		insertPurchaseArgs(pkg, p)...).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("insert purchase %s: %w", p.ID(), err)
	}
	return n == 1, nil
}

// insertPurchaseArgs are insertPurchaseCTEs' parameters for p, built from
// pkg.
func insertPurchaseArgs(pkg *domain.Package, p *domain.Purchase) []any {
	m, targets := toDBPurchase(p)
	price := pkg.Price()
	kinds, ids, positions := make([]string, len(targets)), make([]string, len(targets)), make([]int16, len(targets))
	for i, t := range targets {
		kinds[i], ids[i], positions[i] = t.TargetKind, t.TargetID.String(), t.Position
	}
	args := make([]any, 0, 10+len(purchaseColumns)+3)
	args = append(args, pkg.ID().String(), pkg.Code(), string(pkg.Kind()), pkg.DurationDays(), pkg.BoostWeight(),
		price.Amount(), price.CurrencyID(), price.Currency().IsoCode, price.Currency().Name, price.Currency().Sign)
	args = append(args, purchaseValues(m)...)
	return append(args, kinds, ids, positions)
}

// purchaseValues are m's values in the order of purchaseColumns (the order
// scanPurchases reads them in).
func purchaseValues(m purchaseModel) []any {
	return []any{m.ID, m.TenantID, m.PackageID, m.PackageCode, m.PackageKind, m.BoostWeight,
		m.PriceAmount, m.CurrencyID, m.CurrencyIsoCode, m.CurrencyName, m.CurrencySign,
		m.Status, m.PaymentStatus, m.StartsAt, m.EndsAt, m.CancelReason,
		m.CreatedByUserID, m.UpdatedByUserID, m.CreatedAt, m.UpdatedAt, m.Version}
}

// FindIdempotencyKey returns the record of a tenant's key, or nil.
func (r *PurchaseRepository) FindIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (*app.IdempotencyRecord, error) {
	var m idempotencyKeyModel
	err := r.db.WithContext(ctx).Where("tenant_id = ? AND key = ?", tenantID, key).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find idempotency key: %w", err)
	}
	return toAppIdempotencyRecord(m), nil
}

// Get returns the purchase with its targets.
func (r *PurchaseRepository) Get(ctx context.Context, id uuid.UUID) (*domain.Purchase, error) {
	db := r.db.WithContext(ctx)
	var m purchaseModel
	err := db.Where("id = ?", id).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, domain.PurchaseNotFound(id.String())
	}
	if err != nil {
		return nil, fmt.Errorf("get purchase %s: %w", id, err)
	}
	targets, err := loadTargets(db, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	return toDomainPurchase(m, targets[id])
}

// List returns a page of a tenant's purchases, newest first. The order
// (created_at desc, id desc) is total, so the keyset condition on the same
// pair never repeats or skips a row between pages; the index
// promotion_purchases_tenant_list_idx serves it.
func (r *PurchaseRepository) List(ctx context.Context, q app.PurchaseListQuery) ([]*domain.Purchase, error) {
	db := r.db.WithContext(ctx)
	query := db.Where("tenant_id = ?", q.TenantID)
	if q.Status != "" {
		query = query.Where("status = ?", string(q.Status))
	}
	if q.After != nil {
		query = query.Where("(created_at, id) < (?, ?)", q.After.CreatedAt, q.After.ID)
	}
	var rows []purchaseModel
	if err := query.Order("created_at DESC, id DESC").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list purchases: %w", err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, m := range rows {
		ids[i] = m.ID
	}
	targets, err := loadTargets(db, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*domain.Purchase, len(rows))
	for i, m := range rows {
		if out[i], err = toDomainPurchase(m, targets[m.ID]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdatePurchase runs update on the purchase inside one transaction: the
// row is read with SELECT ... FOR UPDATE (waiting, not skipping: an API
// caller wants an answer, and after the wait it sees the committed result of
// whoever held the lock), then update runs, then — if update made a
// transition — the row is written with a version check and the event goes
// into the outbox. An error from update rolls back and is returned as is.
func (r *PurchaseRepository) UpdatePurchase(ctx context.Context, id uuid.UUID, update func(*domain.Purchase) error) error {
	return postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		if err := tx.DB.Exec("SET LOCAL lock_timeout = '" + lockTimeout + "'").Error; err != nil {
			return fmt.Errorf("set lock timeout: %w", err)
		}
		var m purchaseModel
		err := tx.DB.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("id = ?", id).Take(&m).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return domain.PurchaseNotFound(id.String())
		case isLockNotAvailable(err):
			return &apperror.Error{Kind: apperror.KindConflict, Slug: "purchase-busy",
				Detail: "The purchase is being changed by another operation; try again.", Err: err}
		case err != nil:
			return fmt.Errorf("lock purchase %s: %w", id, err)
		}
		targets, err := loadTargets(tx.DB, []uuid.UUID{id})
		if err != nil {
			return err
		}
		p, err := toDomainPurchase(m, targets[id])
		if err != nil {
			return err
		}
		previous := p.Version()
		if err := update(p); err != nil {
			return err
		}
		if p.Version() == previous {
			return nil // nothing happened, nothing to announce
		}
		return r.saveTransition(ctx, tx, p, previous)
	})
}

// saveTransition writes a transition of p, which was loaded at
// previousVersion, with the statement the expiry batch uses too
// (transitionWrite), and publishes its event, inside tx. If the row moved
// on since it was read, nothing is written and the error wraps
// ErrVersionConflict (an apperror conflict).
func (r *PurchaseRepository) saveTransition(ctx context.Context, tx postgres.Tx, p *domain.Purchase, previousVersion int64) error {
	_, unwritten, err := writeTransitionSet(ctx, tx, []transition{{purchase: p, previousVersion: previousVersion}})
	if err != nil {
		return fmt.Errorf("update purchase %s: %w", p.ID(), err)
	}
	if len(unwritten) > 0 {
		return &apperror.Error{Kind: apperror.KindConflict, Slug: "purchase-version-conflict",
			Detail: fmt.Sprintf("Purchase %s was changed concurrently; reload it and try again.", p.ID()),
			Err:    ErrVersionConflict}
	}
	return r.publish(ctx, tx, p)
}

// publish puts the event of p's current state into the outbox of each
// publication within tx.
func (r *PurchaseRepository) publish(ctx context.Context, tx postgres.Tx, p *domain.Purchase) error {
	msgs, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return err
	}
	if err := r.events.publish(ctx, tx, r.outbox, msgs); err != nil {
		return fmt.Errorf("publish purchase-changed of %s: %w", p.ID(), err)
	}
	return nil
}

// loadTargets returns the target rows of the purchases, each purchase's in
// position order. A purchase without rows is absent from the map.
func loadTargets(db *gorm.DB, purchaseIDs []uuid.UUID) (map[uuid.UUID][]targetModel, error) {
	out := make(map[uuid.UUID][]targetModel, len(purchaseIDs))
	if len(purchaseIDs) == 0 {
		return out, nil
	}
	var rows []targetModel
	if err := db.Where("purchase_id IN ?", purchaseIDs).Order("purchase_id, position").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load purchase targets: %w", err)
	}
	for _, t := range rows {
		out[t.PurchaseID] = append(out[t.PurchaseID], t)
	}
	return out, nil
}
