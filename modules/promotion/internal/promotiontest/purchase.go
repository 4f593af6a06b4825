package promotiontest

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
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

// EveryFieldPurchase is a cancelled purchase, loaded as from the database,
// in which every field of domain.PurchaseFromDatabase is set: the purchase
// the shape tests carry through each form (row, event, HTTP), so a field the
// domain gains is either carried or named as left out. It fails when the
// domain has a field it does not set.
func EveryFieldPurchase(tb testing.TB) *domain.Purchase {
	tb.Helper()
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	s := domain.PurchaseFromDatabase{
		ID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "week",
		PackageKind: domain.PackageKindProjectBoost, BoostWeight: 10,
		Price: domain.UnmarshalPriceFromDatabase(decimal.RequireFromString("1500.50"), 643,
			domain.CurrencySnapshot{IsoCode: "RUB", Name: "Российский рубль", Sign: "₽"}),
		Targets: []domain.Target{
			domain.UnmarshalTargetFromDatabase(domain.TargetKindProject, uuid.New()),
			domain.UnmarshalTargetFromDatabase(domain.TargetKindProject, uuid.New()),
		},
		Status:        domain.StatusCancelled,
		PaymentStatus: domain.PaymentNotRequired,
		StartsAt:      at, EndsAt: at.Add(7 * 24 * time.Hour), CancelReason: "changed plans",
		CreatedByUserID: uuid.New(), UpdatedByUserID: uuid.New(),
		CreatedAt: at, UpdatedAt: at.Add(time.Hour), Version: 2,
	}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		require.False(tb, v.Field(i).IsZero(), "EveryFieldPurchase leaves PurchaseFromDatabase.%s unset", v.Type().Field(i).Name)
	}
	p, err := domain.UnmarshalPurchaseFromDatabase(s)
	require.NoError(tb, err)
	return p
}

// PurchaseFieldNames are the names of domain.PurchaseFromDatabase's fields,
// the domain's list of what a purchase holds, in order.
func PurchaseFieldNames() []string {
	t := reflect.TypeFor[domain.PurchaseFromDatabase]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Name
	}
	return out
}

// RequireFormCarries holds one form of the purchase to the domain: fields
// maps each domain field (PurchaseFieldNames) to the JSON name that carries
// it in the form, or to "" where the form leaves it out on purpose; body,
// the form of EveryFieldPurchase, must have exactly the carried names, each
// non-empty.
func RequireFormCarries(tb testing.TB, form string, fields map[string]string, body any) {
	tb.Helper()
	require.ElementsMatch(tb, PurchaseFieldNames(), slices.Collect(maps.Keys(fields)),
		"every domain field is named for the %s: carried, or left out on purpose", form)
	b, err := json.Marshal(body)
	require.NoError(tb, err)
	var got map[string]json.RawMessage
	require.NoError(tb, json.Unmarshal(b, &got))
	var want []string
	for _, name := range fields {
		if name != "" {
			want = append(want, name)
			require.NotContains(tb, []string{`""`, "null", "0", "[]", "{}"}, string(got[name]), "%s.%s is empty", form, name)
		}
	}
	require.ElementsMatch(tb, want, slices.Collect(maps.Keys(got)), "the %s's fields", form)
}
