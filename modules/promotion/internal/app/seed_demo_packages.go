package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// DemoPackages are the packages `pin dev` offers, one per kind, a week each.
var DemoPackages = []domain.PackageSpec{
	{
		Code: "project-boost-week", Name: "Продвижение проекта на неделю", Kind: domain.PackageKindProjectBoost,
		DurationDays: 7, BoostWeight: 10, Amount: decimal.RequireFromString("1500.00"),
		CurrencyID: domain.CurrencyIDRUB, IsActive: true,
	},
	{
		Code: "property-object-boost-week", Name: "Продвижение объекта на неделю", Kind: domain.PackageKindPropertyObjectBoost,
		DurationDays: 7, BoostWeight: 5, Amount: decimal.RequireFromString("990.00"),
		CurrencyID: domain.CurrencyIDRUB, IsActive: true,
	},
	{
		Code: "post-boost-week", Name: "Продвижение поста на неделю", Kind: domain.PackageKindPostBoost,
		DurationDays: 7, BoostWeight: 3, Amount: decimal.RequireFromString("490.00"),
		CurrencyID: domain.CurrencyIDRUB, IsActive: true,
	},
}

// SeedDemoPackagesHandler stores DemoPackages.
type SeedDemoPackagesHandler struct {
	packages PackageRepository
	now      func() time.Time
	newID    func() (uuid.UUID, error)
}

// Handle stores each demo package whose code is not taken yet, so it can
// run on every start of `pin dev` and never overwrites an admin's edits.
func (h SeedDemoPackagesHandler) Handle(ctx context.Context) error {
	for _, spec := range DemoPackages {
		id, err := h.newID()
		if err != nil {
			return fmt.Errorf("seed demo packages: new id: %w", err)
		}
		pkg, err := domain.NewPackage(id, spec, h.now())
		if err != nil {
			return fmt.Errorf("seed demo packages: %s: %w", spec.Code, err)
		}
		if _, err := h.packages.CreateIfCodeAbsent(ctx, pkg); err != nil {
			return fmt.Errorf("seed demo packages: %s: %w", spec.Code, err)
		}
	}
	return nil
}
