package ports

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// The JSON shapes of the HTTP API (docs/api/openapi.yaml). They are separate
// from the domain types and from the event's so that the API changes only on
// purpose; every API test validates each response against the document
// (additionalProperties: false), which catches a DTO that drifts from it.

// money is an amount on the wire: a JSON number with two decimals (1500.00),
// read and written as decimal text so it never passes through float64.
type money struct{ decimal.Decimal }

// MarshalJSON writes the amount with exactly two decimals.
func (m money) MarshalJSON() ([]byte, error) { return []byte(m.StringFixed(2)), nil }

// UnmarshalJSON accepts a JSON number only: an amount sent as a string is a
// wrong type (400), like any other. null is a no-op, as encoding/json's
// convention has it (request fields are *money, so null reads as absent).
func (m *money) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) == 0 || !(data[0] == '-' || (data[0] >= '0' && data[0] <= '9')) {
		return fmt.Errorf("amount must be a JSON number, got %.20s", data)
	}
	d, err := decimal.NewFromString(string(data))
	if err != nil {
		return fmt.Errorf("amount: %w", err)
	}
	m.Decimal = d
	return nil
}

type currencyResponse struct {
	IsoCode string `json:"isoCode"`
	Name    string `json:"name"`
	Sign    string `json:"sign"`
}

type priceResponse struct {
	Amount     money            `json:"amount"`
	CurrencyID int16            `json:"currencyId"`
	Currency   currencyResponse `json:"currency"`
}

type packageResponse struct {
	ID           uuid.UUID     `json:"id"`
	Code         string        `json:"code"`
	Name         string        `json:"name"`
	Kind         string        `json:"kind"`
	DurationDays int           `json:"durationDays"`
	BoostWeight  int           `json:"boostWeight"`
	Price        priceResponse `json:"price"`
	IsActive     bool          `json:"isActive"`
	CreatedAt    time.Time     `json:"createdAt"`
	UpdatedAt    time.Time     `json:"updatedAt"`
}

type packageListResponse struct {
	Items []packageResponse `json:"items"`
}

type targetJSON struct {
	TargetKind string    `json:"targetKind"`
	TargetID   uuid.UUID `json:"targetId"`
}

type purchaseResponse struct {
	ID            uuid.UUID     `json:"id"`
	TenantID      uuid.UUID     `json:"tenantId"`
	PackageID     uuid.UUID     `json:"packageId"`
	PackageCode   string        `json:"packageCode"`
	PackageKind   string        `json:"packageKind"`
	Targets       []targetJSON  `json:"targets"`
	Status        string        `json:"status"`
	PaymentStatus string        `json:"paymentStatus"`
	BoostWeight   int           `json:"boostWeight"`
	StartsAt      time.Time     `json:"startsAt"`
	EndsAt        time.Time     `json:"endsAt"`
	Price         priceResponse `json:"price"`
	Version       int64         `json:"version"`
	CreatedAt     time.Time     `json:"createdAt"`
	UpdatedAt     time.Time     `json:"updatedAt"`
	// CancelReason is present once the purchase is cancelled.
	CancelReason string `json:"cancelReason,omitempty"`
}

type purchaseListResponse struct {
	Items []purchaseResponse `json:"items"`
	// NextCursor is null on the last page.
	NextCursor *string `json:"nextCursor"`
}

type purchaseRequest struct {
	PackageID uuid.UUID    `json:"packageId"`
	Targets   []targetJSON `json:"targets"`
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

type priceRequest struct {
	Amount     *money `json:"amount"`
	CurrencyID *int   `json:"currencyId"`
}

type createPackageRequest struct {
	Code         string       `json:"code"`
	Name         string       `json:"name"`
	Kind         string       `json:"kind"`
	DurationDays int          `json:"durationDays"`
	BoostWeight  int          `json:"boostWeight"`
	Price        priceRequest `json:"price"`
	IsActive     *bool        `json:"isActive"`
}

// updatePackageRequest is a partial update: an absent (or null) field stays
// as it is.
type updatePackageRequest struct {
	Code         *string       `json:"code"`
	Name         *string       `json:"name"`
	Kind         *string       `json:"kind"`
	DurationDays *int          `json:"durationDays"`
	BoostWeight  *int          `json:"boostWeight"`
	Price        *priceRequest `json:"price"`
	IsActive     *bool         `json:"isActive"`
}

func toHTTPPrice(p domain.Price) priceResponse {
	c := p.Currency()
	return priceResponse{
		Amount:     money{p.Amount()},
		CurrencyID: p.CurrencyID(),
		Currency:   currencyResponse{IsoCode: c.IsoCode, Name: c.Name, Sign: c.Sign},
	}
}

func toHTTPPackage(p *domain.Package) packageResponse {
	return packageResponse{
		ID: p.ID(), Code: p.Code(), Name: p.Name(), Kind: string(p.Kind()),
		DurationDays: p.DurationDays(), BoostWeight: p.BoostWeight(), Price: toHTTPPrice(p.Price()),
		IsActive: p.IsActive(), CreatedAt: p.CreatedAt().UTC(), UpdatedAt: p.UpdatedAt().UTC(),
	}
}

func toHTTPPurchase(p *domain.Purchase) purchaseResponse {
	targets := p.Targets()
	out := purchaseResponse{
		ID: p.ID(), TenantID: p.TenantID(), PackageID: p.PackageID(),
		PackageCode: p.PackageCode(), PackageKind: string(p.PackageKind()),
		Targets: make([]targetJSON, len(targets)),
		Status:  string(p.Status()), PaymentStatus: string(p.PaymentStatus()), BoostWeight: p.BoostWeight(),
		StartsAt: p.StartsAt().UTC(), EndsAt: p.EndsAt().UTC(), Price: toHTTPPrice(p.Price()),
		Version: p.Version(), CreatedAt: p.CreatedAt().UTC(), UpdatedAt: p.UpdatedAt().UTC(),
		CancelReason: p.CancelReason(),
	}
	for i, t := range targets {
		out.Targets[i] = targetJSON{TargetKind: string(t.Kind()), TargetID: t.ID()}
	}
	return out
}

func toDomainTargetRefs(in []targetJSON) []domain.TargetRef {
	refs := make([]domain.TargetRef, len(in))
	for i, t := range in {
		refs[i] = domain.TargetRef{Kind: domain.TargetKind(t.TargetKind), ID: t.TargetID}
	}
	return refs
}

func toDomainPackageChanges(r updatePackageRequest) domain.PackageChanges {
	c := domain.PackageChanges{
		Code: r.Code, Name: r.Name, DurationDays: r.DurationDays, BoostWeight: r.BoostWeight, IsActive: r.IsActive,
	}
	if r.Kind != nil {
		kind := domain.PackageKind(*r.Kind)
		c.Kind = &kind
	}
	if r.Price != nil {
		if r.Price.Amount != nil {
			c.Amount = &r.Price.Amount.Decimal
		}
		c.CurrencyID = r.Price.CurrencyID
	}
	return c
}
