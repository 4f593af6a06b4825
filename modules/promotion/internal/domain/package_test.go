package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

var testNow = time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)

func validPackageSpec() domain.PackageSpec {
	return domain.PackageSpec{
		Code:         "project-boost-week",
		Name:         "Project boost, 1 week",
		Kind:         domain.PackageKindProjectBoost,
		DurationDays: 7,
		BoostWeight:  10,
		Amount:       decimal.RequireFromString("1500.00"),
		CurrencyID:   domain.CurrencyIDRUB,
		IsActive:     true,
	}
}

// requireFields asserts err is one validation error naming exactly fields.
func requireFields(tb testing.TB, err error, fields ...string) {
	tb.Helper()
	appErr, ok := apperror.As(err)
	require.True(tb, ok, "want an apperror, got %v", err)
	require.Equal(tb, apperror.KindInvalid, appErr.Kind, err.Error())
	got := make([]string, 0, len(appErr.Fields))
	for _, f := range appErr.Fields {
		got = append(got, f.Field)
	}
	require.ElementsMatch(tb, fields, got, err.Error())
}

func TestNewPackage(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPackage(uuid.New(), validPackageSpec(), testNow)
	require.NoError(t, err)
	require.Equal(t, "project-boost-week", p.Code())
	require.Equal(t, 7*24*time.Hour, p.Duration())
	require.Equal(t, "1500", p.Price().Amount().String())
	require.Equal(t, domain.RUB, p.Price().Currency())
	require.Equal(t, testNow.Truncate(time.Microsecond), p.CreatedAt(), "stored precision")
}

func TestNewPackageRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*domain.PackageSpec)
		field  string
	}{
		{"empty code", func(s *domain.PackageSpec) { s.Code = "" }, "code"},
		{"upper-case code", func(s *domain.PackageSpec) { s.Code = "Project" }, "code"},
		{"double hyphen", func(s *domain.PackageSpec) { s.Code = "a--b" }, "code"},
		{"leading hyphen", func(s *domain.PackageSpec) { s.Code = "-a" }, "code"},
		{"trailing hyphen", func(s *domain.PackageSpec) { s.Code = "a-" }, "code"},
		{"long code", func(s *domain.PackageSpec) { s.Code = strings.Repeat("a", 65) }, "code"},
		{"blank name", func(s *domain.PackageSpec) { s.Name = "  " }, "name"},
		{"long name", func(s *domain.PackageSpec) { s.Name = strings.Repeat("я", 201) }, "name"},
		{"unknown kind", func(s *domain.PackageSpec) { s.Kind = "Banner" }, "kind"},
		{"zero days", func(s *domain.PackageSpec) { s.DurationDays = 0 }, "durationDays"},
		{"366 days", func(s *domain.PackageSpec) { s.DurationDays = 366 }, "durationDays"},
		{"zero weight", func(s *domain.PackageSpec) { s.BoostWeight = 0 }, "boostWeight"},
		{"1001 weight", func(s *domain.PackageSpec) { s.BoostWeight = 1001 }, "boostWeight"},
		{"negative amount", func(s *domain.PackageSpec) { s.Amount = decimal.RequireFromString("-0.01") }, "price.amount"},
		{"three decimals", func(s *domain.PackageSpec) { s.Amount = decimal.RequireFromString("1.005") }, "price.amount"},
		{"too large", func(s *domain.PackageSpec) { s.Amount = decimal.RequireFromString("1000000000000") }, "price.amount"},
		{"usd", func(s *domain.PackageSpec) { s.CurrencyID = 840 }, "price.currencyId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := validPackageSpec()
			tt.change(&spec)
			_, err := domain.NewPackage(uuid.New(), spec, testNow)
			requireFields(t, err, tt.field)
		})
	}
}

func TestNewPackageBoundaries(t *testing.T) {
	t.Parallel()
	spec := validPackageSpec()
	spec.Code, spec.DurationDays, spec.BoostWeight = "a1-b2-c3", 365, 1000
	spec.Amount = decimal.RequireFromString("999999999999.99")
	_, err := domain.NewPackage(uuid.New(), spec, testNow)
	require.NoError(t, err)

	spec.DurationDays, spec.BoostWeight, spec.Amount = 1, 1, decimal.Zero
	p, err := domain.NewPackage(uuid.New(), spec, testNow)
	require.NoError(t, err, "a free package is allowed")
	require.True(t, p.Price().Amount().IsZero())

	spec.Amount = decimal.RequireFromString("1.500") // trailing zero: still two decimals' worth
	_, err = domain.NewPackage(uuid.New(), spec, testNow)
	require.NoError(t, err)
}

func TestNewPackageReportsEveryField(t *testing.T) {
	t.Parallel()
	_, err := domain.NewPackage(uuid.New(), domain.PackageSpec{Amount: decimal.NewFromInt(-1)}, testNow)
	requireFields(t, err, "code", "name", "kind", "durationDays", "boostWeight", "price.amount", "price.currencyId")
}

func TestPackageUpdate(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPackage(uuid.New(), validPackageSpec(), testNow)
	require.NoError(t, err)

	weight, inactive := 50, false
	amount := decimal.RequireFromString("99.90")
	later := testNow.Add(time.Hour)
	require.NoError(t, p.Update(domain.PackageChanges{BoostWeight: &weight, Amount: &amount, IsActive: &inactive}, later))
	require.Equal(t, 50, p.BoostWeight())
	require.Equal(t, "99.9", p.Price().Amount().String())
	require.False(t, p.IsActive())
	require.Equal(t, "project-boost-week", p.Code(), "untouched fields stay")
	require.Equal(t, later.Truncate(time.Microsecond), p.UpdatedAt())

	badWeight, badDays, name := 0, 400, "renamed"
	err = p.Update(domain.PackageChanges{BoostWeight: &badWeight, DurationDays: &badDays, Name: &name}, later.Add(time.Hour))
	requireFields(t, err, "boostWeight", "durationDays")
	require.Equal(t, 50, p.BoostWeight(), "a failed update changes nothing")
	require.Equal(t, "Project boost, 1 week", p.Name(), "a failed update changes nothing")
	require.Equal(t, later.Truncate(time.Microsecond), p.UpdatedAt())
}
