package promotion_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestModuleEmbedsInABareEchoUnderAPrefix mounts the module as another host
// would: a plain echo.New() with echo's own error handler, a prefix group,
// and the host's authenticator middleware instead of the HS256 one. The
// routes answer under the prefix only, and their errors are still the
// problem documents of the API (checked against the OpenAPI document).
func TestModuleEmbedsInABareEchoUnderAPrefix(t *testing.T) {
	t.Parallel()
	const prefix = "/shop/promotion"
	db := testbed.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	module, err := promotion.New(promotion.Deps{
		DB: db.Gorm, Outbox: promotiontest.Publisher(t, nil),
		Authenticate: testbed.AuthenticateTenantHeader(), Logger: logger,
	})
	require.NoError(t, err)
	require.NoError(t, module.SeedDemoPackages(t.Context()))

	e := echo.New()
	hostHandled := 0
	hostDefault := echo.DefaultHTTPErrorHandler(false)
	e.HTTPErrorHandler = func(c *echo.Context, err error) { hostHandled++; hostDefault(c, err) }
	module.RegisterRoutes(e.Group(prefix))

	tenant := uuid.NewString()
	do := func(method, path, tenant string, body string) response {
		t.Helper()
		req := httptest.NewRequest(method, prefix+path, strings.NewReader(body))
		if tenant != "" {
			req.Header.Set(testbed.HeaderTestTenant, tenant)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		res := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		// The document describes the paths without the host's prefix.
		validateAgainstOpenAPI(t, request{method: method, path: path}, res)
		return res
	}
	jsonBody := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}

	res := do(http.MethodGet, purchasePath(uuid.NewString()), tenant, "")
	require.Equal(t, http.StatusNotFound, res.status, string(res.body))
	require.Equal(t, "https://pin.dev/problems/purchase-not-found", res.problem(t).Type)

	res = do(http.MethodPost, purchasesPath, tenant, jsonBody(purchaseBody(uuid.NewString(), "Project", uuid.New())))
	require.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
	p := res.problem(t)
	require.Equal(t, "https://pin.dev/problems/validation-failed", p.Type)
	require.Equal(t, []string{"packageId"}, p.fields())

	res = do(http.MethodPost, purchasesPath, tenant, `{"packageId":`)
	require.Equal(t, http.StatusBadRequest, res.status, string(res.body))
	require.Equal(t, "https://pin.dev/problems/malformed-request", res.problem(t).Type)

	res = do(http.MethodGet, purchasesPath, "", "")
	require.Equal(t, http.StatusUnauthorized, res.status, string(res.body))
	require.Equal(t, "https://pin.dev/problems/missing-token", res.problem(t).Type)
	require.NotEmpty(t, res.header.Get(echo.HeaderWWWAuthenticate))

	res = do(http.MethodGet, packagesPath, tenant, "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var packages struct {
		Items []struct{ ID, Code string }
	}
	res.decode(t, &packages)
	var packageID string
	for _, pkg := range packages.Items {
		if pkg.Code == "project-boost-week" {
			packageID = pkg.ID
		}
	}
	require.NotEmpty(t, packageID)
	res = do(http.MethodPost, purchasesPath, tenant, jsonBody(purchaseBody(packageID, "Project", uuid.New())))
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var created struct{ ID string }
	res.decode(t, &created)
	require.Equal(t, prefix+purchasePath(created.ID), res.header.Get(echo.HeaderLocation), "Location names the mounted path")

	require.Zero(t, hostHandled, "the module rendered its errors itself")

	// Only under the prefix: the bare path is the host's, and echo's 404.
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, purchasesPath, bytes.NewReader(nil)))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, 1, hostHandled)
}
