package app

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := Cursor{CreatedAt: time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC), ID: uuid.New()}
	got, err := DecodeCursor(c.Encode())
	require.NoError(t, err)
	require.Equal(t, c, got)
	require.NotContains(t, c.Encode(), "=", "URL-safe without padding")

	for _, bad := range []string{"!!", "YWJj", Cursor{}.Encode()[:10]} {
		_, err := DecodeCursor(bad)
		require.Error(t, err, bad)
	}
}

func TestListPurchasesParse(t *testing.T) {
	t.Parallel()
	q, err := ListPurchases{TenantID: uuid.New()}.parse()
	require.NoError(t, err)
	require.Equal(t, DefaultPageSize, q.Limit)
	require.Nil(t, q.After)

	c := Cursor{CreatedAt: time.Now().UTC().Truncate(time.Microsecond), ID: uuid.New()}
	q, err = ListPurchases{Status: "Expired", Limit: "100", Cursor: c.Encode()}.parse()
	require.NoError(t, err)
	require.Equal(t, domain.StatusExpired, q.Status)
	require.Equal(t, 100, q.Limit)
	require.Equal(t, c, *q.After)

	_, err = ListPurchases{Status: "expired", Limit: "0", Cursor: "x"}.parse()
	appErr, ok := apperror.As(err)
	require.True(t, ok)
	require.Len(t, appErr.Fields, 3)
}

func TestRequestHashIsAboutMeaning(t *testing.T) {
	t.Parallel()
	pkg, a, b := uuid.New(), uuid.New(), uuid.New()
	cmd := PurchasePromotion{PackageID: pkg, Targets: []domain.TargetRef{{Kind: "Project", ID: a}, {Kind: "Project", ID: b}}}
	same := cmd
	same.Actor = Actor{UserID: uuid.New()} // another user of the tenant retrying
	same.IdempotencyKey = "k"
	require.Equal(t, cmd.requestHash(), same.requestHash())

	reordered := cmd
	reordered.Targets = []domain.TargetRef{cmd.Targets[1], cmd.Targets[0]}
	require.NotEqual(t, cmd.requestHash(), reordered.requestHash(), "the order of targets is part of the request")
	other := cmd
	other.PackageID = uuid.New()
	require.NotEqual(t, cmd.requestHash(), other.requestHash())
	require.Len(t, cmd.requestHash(), 64)
}

func TestValidateIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "a", uuid.NewString(), strings.Repeat("~", 255)} {
		require.NoError(t, validateIdempotencyKey(ok), ok)
	}
	for _, bad := range []string{" ", "a b", "ключ", strings.Repeat("a", 256), "tab\t"} {
		require.Equal(t, apperror.KindInvalid, apperror.KindOf(validateIdempotencyKey(bad)), bad)
	}
}

func TestWithFields(t *testing.T) {
	t.Parallel()
	missing := []apperror.FieldError{{Field: "price.amount", Message: "is required"}}
	require.NoError(t, withFields(nil, nil))
	err := withFields(nil, missing)
	appErr, _ := apperror.As(err)
	require.Equal(t, missing, appErr.Fields)

	domainErr := apperror.Invalid("x", apperror.FieldError{Field: "code", Message: "bad"})
	merged, _ := apperror.As(withFields(domainErr, missing))
	require.Len(t, merged.Fields, 2)
	require.Len(t, domainErr.Fields, 1, "the original error is not changed")
}
