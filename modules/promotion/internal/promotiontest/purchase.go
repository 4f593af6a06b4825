package promotiontest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// ActivePurchase is an Active purchase at version 3, loaded as from the
// database, that ends at endsAt, with one target and an acting user.
func ActivePurchase(tb testing.TB, endsAt time.Time) *domain.Purchase {
	tb.Helper()
	p, err := domain.UnmarshalPurchaseFromDatabase(domain.PurchaseFromDatabase{
		ID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "week",
		PackageKind: domain.PackageKindProjectBoost, BoostWeight: 10,
		Price: domain.UnmarshalPriceFromDatabase(decimal.RequireFromString("15.00"), 1,
			domain.CurrencySnapshot{IsoCode: "EUR", Name: "Euro", Sign: "€"}),
		Targets:       []domain.Target{domain.UnmarshalTargetFromDatabase(domain.TargetKindProject, uuid.New())},
		Status:        domain.StatusActive,
		PaymentStatus: domain.PaymentNotRequired,
		StartsAt:      endsAt.Add(-7 * 24 * time.Hour), EndsAt: endsAt,
		CreatedByUserID: uuid.New(), UpdatedByUserID: uuid.New(),
		CreatedAt: endsAt.Add(-7 * 24 * time.Hour), UpdatedAt: endsAt.Add(-time.Hour), Version: 3,
	})
	require.NoError(tb, err)
	return p
}
