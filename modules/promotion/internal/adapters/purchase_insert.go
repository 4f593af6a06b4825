package adapters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/postgres"
)

// insertPurchaseQuery is the one statement that inserts a purchase with
// its events (sql/purchase_insert.sql).
//
//go:embed sql/purchase_insert.sql
var insertPurchaseQuery string

// builtPurchase is a purchase and the package build made it from.
type builtPurchase struct {
	pkg      *domain.Package
	purchase *domain.Purchase
}

// built builds the purchase on the package: the cached one when cached is
// allowed and build admits it, else the row as read now (cached for the
// next purchase), which it reports as fresh. build reports a missing
// package as a packageId error.
func (r *PurchaseRepository) built(ctx context.Context, packageID uuid.UUID,
	build func(*domain.Package) (*domain.Purchase, error), cached bool) (b *builtPurchase, fresh bool, err error) {
	if pkg := r.packages.get(packageID); cached && pkg != nil {
		if p, err := build(pkg); err == nil {
			return &builtPurchase{pkg: pkg, purchase: p}, false, nil
		}
	}
	pkg, err := getPackage(selectPackages(r.db.WithContext(ctx)), packageID)
	if errors.Is(err, domain.ErrPackageNotFound) {
		pkg, err = nil, nil
	}
	if err != nil {
		return nil, true, err
	}
	r.packages.put(pkg)
	p, err := build(pkg)
	if err != nil {
		return nil, true, err
	}
	if pkg == nil || !pkg.IsActive() {
		return nil, true, fmt.Errorf("insert purchase %s: package %s is missing or inactive, yet build admitted it", p.ID(), packageID)
	}
	return &builtPurchase{pkg: pkg, purchase: p}, true, nil
}

// insert writes b's purchase, its targets, its events and claim (when not
// nil) by one statement on tx (insertPurchaseQuery). It reports false,
// having written nothing, when the package's row no longer equals b.pkg or
// the claim's key is taken.
func (r *PurchaseRepository) insert(ctx context.Context, tx postgres.Tx, b *builtPurchase, claim *app.IdempotencyRecord) (bool, error) {
	p := b.purchase
	if claim != nil && claim.PurchaseID != p.ID() {
		return false, fmt.Errorf("insert purchase %s: its idempotency key names purchase %s", p.ID(), claim.PurchaseID)
	}
	msgs, ev, err := r.events.messages(ctx, p, p.UpdatedAt())
	if err != nil {
		return false, err
	}
	ids, err := r.events.writeWith(ctx, tx, r.outbox, insertPurchaseQuery, insertPurchaseArgs(b.pkg, p, ev, claim),
		[]string{p.ID().String()}, msgs)
	if err != nil {
		return false, fmt.Errorf("insert purchase %s: %w", p.ID(), err)
	}
	return len(ids) == 1, nil
}

// insertPurchaseArgs are insertPurchaseQuery's parameters, but @events, for p, built from
// pkg, with ev its event and claim its key's record (nil: none).
func insertPurchaseArgs(pkg *domain.Package, p *domain.Purchase, ev lastEvent, claim *app.IdempotencyRecord) pgx.NamedArgs {
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
		"claim_key": nil, "claim_tenant_id": nil, "claim_request_hash": nil, "claim_created_at": nil,
	}
	if claim != nil {
		args["claim_key"], args["claim_tenant_id"] = claim.Key, claim.TenantID.String()
		args["claim_request_hash"], args["claim_created_at"] = claim.RequestHash, claim.CreatedAt
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
