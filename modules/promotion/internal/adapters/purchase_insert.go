package adapters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/postgres"
)

// insertPurchaseCTEs is the literal head of the one statement that inserts
// a purchase (sql/purchase_insert.sql); insert adds the outbox's CTEs.
//
//go:embed sql/purchase_insert.sql
var insertPurchaseCTEs string

// builtPurchase is a purchase and the package build made it from.
type builtPurchase struct {
	pkg      *domain.Package
	purchase *domain.Purchase
}

// guess builds the purchase on the cached package: nil when there is none,
// or build refuses it (the package read in Add's transaction decides).
func (r *PurchaseRepository) guess(packageID uuid.UUID, build func(*domain.Package) (*domain.Purchase, error)) *builtPurchase {
	cached := r.packages.get(packageID)
	if cached == nil {
		return nil
	}
	p, err := build(cached)
	if err != nil {
		return nil
	}
	return &builtPurchase{pkg: cached, purchase: p}
}

// buildOnRow reads the package FOR SHARE inside tx, caches it, and builds
// the purchase on it; build reports a missing package as a packageId error.
func (r *PurchaseRepository) buildOnRow(tx postgres.Tx, packageID uuid.UUID, build func(*domain.Package) (*domain.Purchase, error)) (*builtPurchase, error) {
	pkg, err := getPackage(selectPackages(tx.DB).Clauses(clause.Locking{
		Strength: clause.LockingStrengthShare, Table: clause.Table{Name: "p"},
	}), packageID)
	if errors.Is(err, domain.ErrPackageNotFound) {
		pkg, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.packages.put(pkg)
	p, err := build(pkg)
	if err != nil {
		return nil, err
	}
	if pkg == nil || !pkg.IsActive() {
		return nil, fmt.Errorf("insert purchase %s: package %s is missing or inactive, yet build admitted it", p.ID(), packageID)
	}
	return &builtPurchase{pkg: pkg, purchase: p}, nil
}

// claimKey claims the idempotency key of claim inside tx (nothing when
// claim is nil): app.ErrIdempotencyKeyTaken when a committed request holds it.
func claimKey(tx postgres.Tx, claim *app.IdempotencyRecord) error {
	if claim == nil {
		return nil
	}
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
	return nil
}

// querier runs a statement that returns rows: a transaction's raw handle
// (postgres.Tx.Exec), or pool.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (watermillsql.Rows, error)
}

// pool is the database's connection pool as a querier, for the statement
// that is its own transaction.
type pool struct{ gorm.ConnPool }

// QueryContext runs query on a connection of the pool.
func (p pool) QueryContext(ctx context.Context, query string, args ...any) (watermillsql.Rows, error) {
	return p.ConnPool.QueryContext(ctx, query, args...)
}

// insert writes b's purchase, its targets and its events by one statement
// on q (the pool, where the statement is its own transaction, or a
// transaction's handle). It reports false, having written nothing, when the
// package's row no longer equals b.pkg; either way the row stays
// share-locked until the transaction ends.
func (r *PurchaseRepository) insert(ctx context.Context, q querier, b *builtPurchase) (bool, error) {
	p := b.purchase
	msgs, ev, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return false, err
	}
	bs, err := r.events.ready(ctx, r.outbox, msgs)
	if err != nil {
		return false, fmt.Errorf("publish purchase-changed of %s: %w", p.ID(), err)
	}
	events, args := bs.ctes("purchase", insertPurchaseArgs(b.pkg, p, ev))
	n, err := queryCount(ctx, q, insertPurchaseCTEs+events+"\nSELECT count(*) FROM purchase", args)
	if err := bs.done(err); err != nil {
		return false, fmt.Errorf("insert purchase %s: %w", p.ID(), err)
	}
	return n == 1, nil
}

// queryCount runs a statement that returns one count.
func queryCount(ctx context.Context, q querier, query string, args []any) (int, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		err = rows.Scan(&n)
	}
	return n, errors.Join(err, rows.Close())
}

// insertPurchaseArgs are insertPurchaseCTEs' parameters for p, built from
// pkg, with ev its event.
func insertPurchaseArgs(pkg *domain.Package, p *domain.Purchase, ev lastEvent) []any {
	m, targets := toDBPurchase(p)
	price := pkg.Price()
	kinds, ids, positions := make([]string, len(targets)), make([]string, len(targets)), make([]int16, len(targets))
	for i, t := range targets {
		kinds[i], ids[i], positions[i] = t.TargetKind, t.TargetID.String(), t.Position
	}
	args := make([]any, 0, 10+len(purchaseColumns)+5)
	args = append(args, pkg.ID().String(), pkg.Code(), string(pkg.Kind()), pkg.DurationDays(), pkg.BoostWeight(),
		price.Amount(), price.CurrencyID(), price.Currency().IsoCode, price.Currency().Name, price.Currency().Sign)
	args = append(args, purchaseValues(m)...)
	return append(args, kinds, ids, positions, ev.id, ev.at)
}

// purchaseValues are m's values in the order of purchaseColumns (the order
// scanPurchases reads them in).
func purchaseValues(m purchaseModel) []any {
	return []any{m.ID, m.TenantID, m.PackageID, m.PackageCode, m.PackageKind, m.BoostWeight,
		m.PriceAmount, m.CurrencyID, m.CurrencyIsoCode, m.CurrencyName, m.CurrencySign,
		m.Status, m.PaymentStatus, m.StartsAt, m.EndsAt, m.CancelReason,
		m.CreatedByUserID, m.UpdatedByUserID, m.CreatedAt, m.UpdatedAt, m.Version}
}
