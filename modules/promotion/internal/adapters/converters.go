package adapters

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// toDBPackage maps a package to its row.
func toDBPackage(p *domain.Package) packageModel {
	return packageModel{
		ID: p.ID(), Code: p.Code(), Name: p.Name(), Kind: string(p.Kind()),
		DurationDays: p.DurationDays(), BoostWeight: p.BoostWeight(),
		PriceAmount: p.Price().Amount(), CurrencyID: p.Price().CurrencyID(),
		IsActive: p.IsActive(), CreatedAt: p.CreatedAt(), UpdatedAt: p.UpdatedAt(),
	}
}

// toDomainPackage maps a package row joined with its currency.
func toDomainPackage(r packageRow) *domain.Package {
	m := r.Package
	price := domain.UnmarshalPriceFromDatabase(m.PriceAmount, m.CurrencyID, domain.CurrencySnapshot{
		IsoCode: r.CurrencyIsoCode, Name: r.CurrencyName, Sign: r.CurrencySign,
	})
	return domain.UnmarshalPackageFromDatabase(m.ID, m.Code, m.Name, domain.PackageKind(m.Kind),
		m.DurationDays, m.BoostWeight, price, m.IsActive, m.CreatedAt, m.UpdatedAt)
}

// toDBPurchase maps a purchase to its row and its target rows.
func toDBPurchase(p *domain.Purchase) (purchaseModel, []targetModel) {
	price := p.Price()
	m := purchaseModel{
		ID: p.ID(), TenantID: p.TenantID(), PackageID: p.PackageID(),
		PackageCode: p.PackageCode(), PackageKind: string(p.PackageKind()), BoostWeight: p.BoostWeight(),
		PriceAmount: price.Amount(), CurrencyID: price.CurrencyID(),
		CurrencyIsoCode: price.Currency().IsoCode, CurrencyName: price.Currency().Name, CurrencySign: price.Currency().Sign,
		Status: string(p.Status()), PaymentStatus: string(p.PaymentStatus()),
		StartsAt: p.StartsAt(), EndsAt: p.EndsAt(),
		CreatedByUserID: p.CreatedByUserID(), UpdatedByUserID: toDBNullUUID(p.UpdatedByUserID()),
		CreatedAt: p.CreatedAt(), UpdatedAt: p.UpdatedAt(), Version: p.Version(),
	}
	if reason := p.CancelReason(); reason != "" {
		m.CancelReason = &reason
	}
	targets := p.Targets()
	rows := make([]targetModel, len(targets))
	for i, t := range targets {
		rows[i] = targetModel{PurchaseID: p.ID(), TargetKind: string(t.Kind()), TargetID: t.ID(), Position: int16(i)}
	}
	return m, rows
}

// toDomainPurchase maps a purchase row and its target rows (in position
// order). It fails on a row with an unknown enum value; a purchase without
// targets is returned as it is (see domain.UnmarshalPurchaseFromDatabase).
func toDomainPurchase(m purchaseModel, targets []targetModel) (*domain.Purchase, error) {
	ts := make([]domain.Target, len(targets))
	for i, t := range targets {
		ts[i] = domain.UnmarshalTargetFromDatabase(domain.TargetKind(t.TargetKind), t.TargetID)
	}
	var reason string
	if m.CancelReason != nil {
		reason = *m.CancelReason
	}
	p, err := domain.UnmarshalPurchaseFromDatabase(domain.PurchaseFromDatabase{
		ID: m.ID, TenantID: m.TenantID, PackageID: m.PackageID,
		PackageCode: m.PackageCode, PackageKind: domain.PackageKind(m.PackageKind), BoostWeight: m.BoostWeight,
		Price: domain.UnmarshalPriceFromDatabase(m.PriceAmount, m.CurrencyID, domain.CurrencySnapshot{
			IsoCode: m.CurrencyIsoCode, Name: m.CurrencyName, Sign: m.CurrencySign,
		}),
		Targets: ts, Status: domain.Status(m.Status), PaymentStatus: domain.PaymentStatus(m.PaymentStatus),
		StartsAt: m.StartsAt, EndsAt: m.EndsAt, CancelReason: reason,
		CreatedByUserID: m.CreatedByUserID, UpdatedByUserID: m.UpdatedByUserID.UUID,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Version: m.Version,
	})
	if err != nil {
		return nil, fmt.Errorf("load purchase: %w", err)
	}
	return p, nil
}

// toAppIdempotencyRecord maps an idempotency row.
func toAppIdempotencyRecord(m idempotencyKeyModel) *app.IdempotencyRecord {
	return &app.IdempotencyRecord{
		TenantID: m.TenantID, Key: m.Key, RequestHash: m.RequestHash, PurchaseID: m.PurchaseID, CreatedAt: m.CreatedAt.UTC(),
	}
}

// toDBNullUUID stores uuid.Nil as NULL: "no user" rather than a fake user.
func toDBNullUUID(id uuid.UUID) uuid.NullUUID {
	return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil}
}
