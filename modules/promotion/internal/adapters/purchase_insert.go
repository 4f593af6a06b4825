package adapters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm/clause"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// insertPurchaseHead is the module's half of the one statement that inserts
// a purchase (sql/purchase_insert.sql); outbox.NewChange adds its own.
//
//go:embed sql/purchase_insert.sql
var insertPurchaseHead string

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
	pkg, err := getPackage(selectPackages(tx.GORM()).Clauses(clause.Locking{
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
	res := tx.GORM().Clauses(clause.OnConflict{
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

// insert writes b's purchase, its targets and its events by one statement
// in tx (purchaseInsert). It reports false, having written nothing, when
// the package's row no longer equals b.pkg; either way the row stays
// share-locked until the transaction ends.
func (r *PurchaseRepository) insert(ctx context.Context, tx postgres.Tx, b *builtPurchase) (bool, error) {
	p := b.purchase
	msgs, ev, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return false, err
	}
	ids, err := r.outbox.Write(ctx, tx, outbox.Write{Events: r.events.outboxEvents(msgs), Change: r.insertChange,
		Args: insertPurchaseArgs(b.pkg, p, ev), Keys: []string{p.ID().String()}})
	if err != nil {
		return false, fmt.Errorf("insert purchase %s: %w", p.ID(), err)
	}
	return len(ids) == 1, nil
}

// insertPurchaseArgs are insertPurchaseHead's parameters for p, built from
// pkg, with ev its event.
func insertPurchaseArgs(pkg *domain.Package, p *domain.Purchase, ev lastEvent) pgx.NamedArgs {
	m, targets := toDBPurchase(p)
	price := pkg.Price()
	kinds, ids, positions := make([]string, len(targets)), make([]string, len(targets)), make([]int16, len(targets))
	for i, t := range targets {
		kinds[i], ids[i], positions[i] = t.TargetKind, t.TargetID.String(), t.Position
	}
	args := pgx.NamedArgs{
		"pkg_id": pkg.ID().String(), "pkg_code": pkg.Code(), "pkg_kind": string(pkg.Kind()),
		"pkg_duration_days": pkg.DurationDays(), "pkg_boost_weight": pkg.BoostWeight(),
		"pkg_price_amount": price.Amount(), "pkg_currency_id": price.CurrencyID(),
		"pkg_currency_iso_code": price.Currency().IsoCode, "pkg_currency_name": price.Currency().Name,
		"pkg_currency_sign": price.Currency().Sign,
		"target_kinds":      kinds, "target_ids": ids, "target_positions": positions,
		"last_event_id": ev.id, "last_event_at": ev.at,
	}
	for i, v := range purchaseValues(m) {
		args[purchaseColumns[i]] = v
	}
	return args
}

// purchaseValues are m's values in the order of purchaseColumns (the order
// scanPurchases reads them in).
func purchaseValues(m purchaseModel) []any {
	return []any{m.ID, m.TenantID, m.PackageID, m.PackageCode, m.PackageKind, m.BoostWeight,
		m.PriceAmount, m.CurrencyID, m.CurrencyIsoCode, m.CurrencyName, m.CurrencySign,
		m.Status, m.PaymentStatus, m.StartsAt, m.EndsAt, m.CancelReason,
		m.CreatedByUserID, m.UpdatedByUserID, m.CreatedAt, m.UpdatedAt, m.Version}
}
