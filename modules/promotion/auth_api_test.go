package promotion_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/auth"
)

// signed makes a token with arbitrary claims and signing, for the cases
// that Authenticator.Issue refuses to make.
func signed(tb testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(tb, err)
	return tok
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	tenant := uuid.New()
	claims := func(exp time.Time) jwt.MapClaims {
		return jwt.MapClaims{"sub": uuid.NewString(), "tenant_id": tenant.String(), "exp": exp.Unix()}
	}
	otherKey, err := auth.NewAuthenticator([]byte("another-secret-of-at-least-32-bytes!!"))
	require.NoError(t, err)
	wrongKey, err := otherKey.Issue(auth.Principal{UserID: uuid.New(), TenantID: tenant}, time.Hour)
	require.NoError(t, err)

	tokens := map[string]string{
		"no token":   "",
		"garbage":    "not.a.jwt",
		"expired":    signed(t, jwt.SigningMethodHS256, testSecret, claims(time.Now().Add(-time.Minute))),
		"no exp":     signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": uuid.NewString(), "tenant_id": tenant.String()}),
		"wrong key":  wrongKey,
		"alg none":   signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(time.Now().Add(time.Hour))),
		"HS512":      signed(t, jwt.SigningMethodHS512, testSecret, claims(time.Now().Add(time.Hour))),
		"bad sub":    signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": time.Now().Add(time.Hour).Unix()}),
		"bad tenant": signed(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": uuid.NewString(), "tenant_id": "acme", "exp": time.Now().Add(time.Hour).Unix()}),
	}
	id := uuid.NewString()
	routes := []request{
		{method: http.MethodGet, path: packagesPath},
		{method: http.MethodPost, path: adminPackagesPath, body: packageBody("x", "PostBoost")},
		{method: http.MethodPatch, path: adminPackagesPath + "/" + id, body: map[string]any{"boostWeight": 2}},
		{method: http.MethodPost, path: purchasesPath, body: purchaseBody(id, "Project", uuid.New())},
		{method: http.MethodGet, path: purchasesPath},
		{method: http.MethodGet, path: purchasePath(id)},
		{method: http.MethodPost, path: cancelPath(id), body: map[string]any{"reason": "x"}},
	}
	for name, token := range tokens {
		for _, r := range routes {
			r.token = token
			res := b.do(t, r)
			require.Equal(t, http.StatusUnauthorized, res.status, "%s: %s %s", name, r.method, r.path)
			res.problem(t)
			require.NotEmpty(t, res.header.Get("WWW-Authenticate"))
		}
	}
	b.requireNothingWritten(t)
	require.Zero(t, b.count(t, "SELECT count(*) FROM promotion.promotion_packages"))
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	tenantToken := b.tenantToken(t, uuid.New())
	adminOnly := b.adminToken(t)
	noTenant := b.token(t, auth.Principal{UserID: uuid.New()})
	id := uuid.NewString()

	// A tenant (even one with roles other than admin) on the admin routes.
	for _, tok := range []string{tenantToken, b.token(t, auth.Principal{UserID: uuid.New(), TenantID: uuid.New(), Roles: []string{"manager"}})} {
		res := b.do(t, request{method: http.MethodPost, path: adminPackagesPath, token: tok, body: packageBody("x", "PostBoost")})
		require.Equal(t, http.StatusForbidden, res.status)
		res.problem(t)
		res = b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + id, token: tok, body: map[string]any{"boostWeight": 2}})
		require.Equal(t, http.StatusForbidden, res.status)
	}
	// Tenant routes need a tenant: an admin without one, or a bare user, is 403.
	for _, tok := range []string{adminOnly, noTenant} {
		for _, r := range []request{
			{method: http.MethodGet, path: packagesPath},
			{method: http.MethodPost, path: purchasesPath, body: purchaseBody(id, "Project", uuid.New())},
			{method: http.MethodGet, path: purchasesPath},
		} {
			r.token = tok
			res := b.do(t, r)
			require.Equal(t, http.StatusForbidden, res.status, "%s %s", r.method, r.path)
		}
	}
	// Reading and cancelling one purchase: tenant or admin; a bare user is 403.
	res := b.do(t, request{method: http.MethodGet, path: purchasePath(id), token: noTenant})
	require.Equal(t, http.StatusForbidden, res.status)
	res = b.do(t, request{method: http.MethodGet, path: purchasePath(id), token: adminOnly})
	require.Equal(t, http.StatusNotFound, res.status, "the admin passes authorization; the purchase does not exist")
	b.requireNothingWritten(t)
	require.Zero(t, b.count(t, "SELECT count(*) FROM promotion.promotion_packages"))
}
