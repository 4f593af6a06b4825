package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/httpserver"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
	userID      = uuid.MustParse("11111111-2222-4333-8444-555555555555")
	tenantID    = uuid.MustParse("aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
)

// testBundle is an Echo server with the auth middleware in front of
// routes that echo the principal back.
type testBundle struct {
	authn *auth.Authenticator
	e     *echo.Echo
}

func newTestBundle(tb testing.TB) *testBundle {
	tb.Helper()
	authn, err := auth.NewAuthenticator(testSecret)
	require.NoError(tb, err)
	e := httpserver.New(httpserver.Config{}, nil, prometheus.NewRegistry(), noop.NewTracerProvider())

	whoami := func(c *echo.Context) error {
		p, ok := auth.FromContext(c.Request().Context())
		if !ok {
			return c.NoContent(http.StatusTeapot)
		}
		return c.JSON(http.StatusOK, p)
	}
	g := e.Group("/api", authn.Middleware())
	g.GET("/me", whoami)
	g.GET("/tenant", whoami, auth.RequireTenant())
	g.GET("/admin", whoami, auth.RequireAdmin())
	g.GET("/either", whoami, auth.RequireTenantOrAdmin())
	// A route that forgot the authentication middleware must fail closed.
	e.GET("/unguarded", whoami, auth.RequireTenant())
	return &testBundle{authn: authn, e: e}
}

func (b *testBundle) get(tb testing.TB, path, authorization string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if authorization != "" {
		req.Header.Set(echo.HeaderAuthorization, authorization)
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

// sign makes an HS-family token with arbitrary claims.
func sign(tb testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(tb, err)
	return s
}

func validClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub":       userID.String(),
		"tenant_id": tenantID.String(),
		"roles":     []string{"developer"},
		"exp":       time.Now().Add(time.Hour).Unix(),
	}
}

func with(c jwt.MapClaims, key string, value any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	if value == nil {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

func b64(tb testing.TB, v any) string {
	tb.Helper()
	data, err := json.Marshal(v)
	require.NoError(tb, err)
	return base64.RawURLEncoding.EncodeToString(data)
}

func TestMiddleware(t *testing.T) {
	t.Parallel()

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, c) }
	valid := hs(validClaims())
	parts := strings.Split(valid, ".")

	tests := []struct {
		name          string
		authorization string
		status        int
		slug          string
		detail        string
		want          auth.Principal
	}{
		{name: "no header", status: 401, slug: "missing-token"},
		{name: "wrong scheme", authorization: "Basic dXNlcjpwYXNz", status: 401, slug: "missing-token"},
		{name: "scheme without token", authorization: "Bearer ", status: 401, slug: "missing-token"},
		{name: "token without scheme", authorization: valid, status: 401, slug: "missing-token"},
		{name: "garbage", authorization: "Bearer not.a.jwt", status: 401, slug: "invalid-token"},
		{name: "two segments", authorization: "Bearer " + parts[0] + "." + parts[1], status: 401, slug: "invalid-token"},
		{name: "expired", authorization: "Bearer " + hs(with(validClaims(), "exp", time.Now().Add(-time.Minute).Unix())),
			status: 401, slug: "invalid-token", detail: "The bearer token has expired."},
		{name: "not valid yet", authorization: "Bearer " + hs(with(validClaims(), "nbf", time.Now().Add(time.Hour).Unix())),
			status: 401, slug: "invalid-token"},
		{name: "issued in the future", authorization: "Bearer " + hs(with(validClaims(), "iat", time.Now().Add(time.Hour).Unix())),
			status: 401, slug: "invalid-token"},
		{name: "wrong key", authorization: "Bearer " + sign(t, jwt.SigningMethodHS256, otherSecret, validClaims()),
			status: 401, slug: "invalid-token"},
		{name: "tampered payload", authorization: "Bearer " + parts[0] + "." +
			b64(t, with(validClaims(), "roles", []string{"admin"})) + "." + parts[2], status: 401, slug: "invalid-token"},
		{name: "alg none, crafted by hand", authorization: "Bearer " + b64(t, map[string]string{"alg": "none", "typ": "JWT"}) +
			"." + b64(t, validClaims()) + ".", status: 401, slug: "invalid-token"},
		{name: "alg None, capitalised", authorization: "Bearer " + b64(t, map[string]string{"alg": "None", "typ": "JWT"}) +
			"." + b64(t, validClaims()) + ".", status: 401, slug: "invalid-token"},
		{name: "alg none with the real signature", authorization: "Bearer " + b64(t, map[string]string{"alg": "none", "typ": "JWT"}) +
			"." + parts[1] + "." + parts[2], status: 401, slug: "invalid-token"},
		{name: "HS384 with the right key", authorization: "Bearer " + sign(t, jwt.SigningMethodHS384, testSecret, validClaims()),
			status: 401, slug: "invalid-token"},
		{name: "HS512 with the right key", authorization: "Bearer " + sign(t, jwt.SigningMethodHS512, testSecret, validClaims()),
			status: 401, slug: "invalid-token"},
		{name: "RS256", authorization: "Bearer " + sign(t, jwt.SigningMethodRS256, rsaKey, validClaims()),
			status: 401, slug: "invalid-token"},
		{name: "missing exp", authorization: "Bearer " + hs(with(validClaims(), "exp", nil)), status: 401, slug: "invalid-token"},
		{name: "exp as a string", authorization: "Bearer " + hs(with(validClaims(), "exp", "tomorrow")), status: 401, slug: "invalid-token"},
		{name: "missing sub", authorization: "Bearer " + hs(with(validClaims(), "sub", nil)), status: 401, slug: "invalid-token"},
		{name: "sub not a uuid", authorization: "Bearer " + hs(with(validClaims(), "sub", "alice")), status: 401, slug: "invalid-token"},
		{name: "sub nil uuid", authorization: "Bearer " + hs(with(validClaims(), "sub", uuid.Nil.String())), status: 401, slug: "invalid-token"},
		{name: "sub as urn", authorization: "Bearer " + hs(with(validClaims(), "sub", "urn:uuid:"+userID.String())), status: 401, slug: "invalid-token"},
		{name: "bad tenant uuid", authorization: "Bearer " + hs(with(validClaims(), "tenant_id", "acme")), status: 401, slug: "invalid-token"},
		{name: "tenant nil uuid", authorization: "Bearer " + hs(with(validClaims(), "tenant_id", uuid.Nil.String())), status: 401, slug: "invalid-token"},
		{name: "tenant as a number", authorization: "Bearer " + hs(with(validClaims(), "tenant_id", 42)), status: 401, slug: "invalid-token"},
		{name: "roles as a string", authorization: "Bearer " + hs(with(validClaims(), "roles", "admin")), status: 401, slug: "invalid-token"},
		{name: "valid tenant token", authorization: "Bearer " + valid, status: 200,
			want: auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer"}}},
		{name: "lower-case scheme", authorization: "bearer " + valid, status: 200,
			want: auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer"}}},
		{name: "upper-case uuid", authorization: "Bearer " + hs(with(validClaims(), "tenant_id", strings.ToUpper(tenantID.String()))), status: 200,
			want: auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer"}}},
		{name: "admin without tenant", authorization: "Bearer " + hs(with(with(validClaims(), "tenant_id", nil), "roles", []string{"admin"})),
			status: 200, want: auth.Principal{UserID: userID, Roles: []string{"admin"}}},
		{name: "no roles", authorization: "Bearer " + hs(with(validClaims(), "roles", nil)), status: 200,
			want: auth.Principal{UserID: userID, TenantID: tenantID}},
		{name: "several roles", authorization: "Bearer " + hs(with(validClaims(), "roles", []string{"developer", "admin"})), status: 200,
			want: auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer", "admin"}}},
	}

	b := newTestBundle(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := b.get(t, "/api/me", tt.authorization)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			if tt.status == http.StatusOK {
				var got auth.Principal
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
				require.Equal(t, tt.want, got)
				return
			}
			require.Equal(t, "application/problem+json", rec.Header().Get(echo.HeaderContentType))
			require.True(t, strings.HasPrefix(rec.Header().Get(echo.HeaderWWWAuthenticate), "Bearer"),
				"WWW-Authenticate: %q", rec.Header().Get(echo.HeaderWWWAuthenticate))
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.Equal(t, "https://pin.dev/problems/"+tt.slug, p.Type)
			require.Equal(t, http.StatusUnauthorized, p.Status)
			if tt.detail != "" {
				require.Equal(t, tt.detail, p.Detail)
			}
			require.NotContains(t, rec.Body.String(), "signature", "the cause stays in the logs")
		})
	}
}

func TestRequireRoles(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t)
	issue := func(p auth.Principal) string {
		token, err := b.authn.Issue(p, time.Hour)
		require.NoError(t, err)
		return "Bearer " + token
	}
	tenant := issue(auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer"}})
	admin := issue(auth.Principal{UserID: userID, Roles: []string{auth.RoleAdmin}})
	tenantAdmin := issue(auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{auth.RoleAdmin}})
	nobody := issue(auth.Principal{UserID: userID})

	tests := []struct {
		path, token string
		status      int
		slug        string
	}{
		{"/api/tenant", tenant, 200, ""},
		{"/api/tenant", tenantAdmin, 200, ""},
		{"/api/tenant", admin, 403, "tenant-required"},
		{"/api/tenant", nobody, 403, "tenant-required"},
		{"/api/admin", admin, 200, ""},
		{"/api/admin", tenantAdmin, 200, ""},
		{"/api/admin", tenant, 403, "admin-required"},
		{"/api/admin", nobody, 403, "admin-required"},
		{"/api/either", tenant, 200, ""},
		{"/api/either", admin, 200, ""},
		{"/api/either", nobody, 403, "tenant-required"},
		{"/api/either", "", 401, "missing-token"},
		{"/unguarded", tenant, 401, "missing-token"},
	}
	for _, tt := range tests {
		rec := b.get(t, tt.path, tt.token)
		require.Equal(t, tt.status, rec.Code, "%s: %s", tt.path, rec.Body.String())
		if tt.slug != "" {
			require.Equal(t, "application/problem+json", rec.Header().Get(echo.HeaderContentType))
			require.Contains(t, rec.Body.String(), `"type":"https://pin.dev/problems/`+tt.slug+`"`)
		}
	}
}

func TestIssue(t *testing.T) {
	t.Parallel()

	authn, err := auth.NewAuthenticator(testSecret)
	require.NoError(t, err)

	p := auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{"developer"}}
	token, err := authn.Issue(p, time.Hour)
	require.NoError(t, err)
	got, err := authn.Authenticate(token)
	require.NoError(t, err)
	require.Equal(t, p, got)

	// The wire form is what interfaces.md promises.
	parsed, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	require.NoError(t, err)
	require.Equal(t, "HS256", parsed.Header["alg"])
	claims := parsed.Claims.(jwt.MapClaims)
	require.Equal(t, userID.String(), claims["sub"])
	require.Equal(t, tenantID.String(), claims["tenant_id"])
	require.Equal(t, []any{"developer"}, claims["roles"])
	exp, err := claims.GetExpirationTime()
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), exp.Time, time.Minute)

	// No tenant: no tenant_id claim at all.
	token, err = authn.Issue(auth.Principal{UserID: userID, Roles: []string{auth.RoleAdmin}}, time.Minute)
	require.NoError(t, err)
	parsed, _, err = jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	require.NoError(t, err)
	require.NotContains(t, parsed.Claims.(jwt.MapClaims), "tenant_id")

	_, err = authn.Issue(auth.Principal{TenantID: tenantID}, time.Hour)
	require.Error(t, err, "a token needs a user")
	_, err = authn.Issue(p, 0)
	require.Error(t, err)

	// A token of another key does not authenticate.
	other, err := auth.NewAuthenticator(otherSecret)
	require.NoError(t, err)
	_, err = other.Authenticate(token)
	require.Error(t, err)
}

func TestNewAuthenticatorNeedsLongSecret(t *testing.T) {
	t.Parallel()

	_, err := auth.NewAuthenticator([]byte("short"))
	require.Error(t, err)
	_, err = auth.NewAuthenticator(testSecret[:31])
	require.Error(t, err)

	// The authenticator keeps its own copy of the key.
	secret := append([]byte(nil), testSecret...)
	authn, err := auth.NewAuthenticator(secret)
	require.NoError(t, err)
	token, err := authn.Issue(auth.Principal{UserID: userID}, time.Hour)
	require.NoError(t, err)
	secret[0] ^= 0xff
	_, err = authn.Authenticate(token)
	require.NoError(t, err)
}
