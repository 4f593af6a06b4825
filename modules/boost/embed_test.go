package boost_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestModuleEmbedsInABareEchoUnderAPrefix: the boost route mounted as
// another host would mount it (echo.New(), a prefix group, the host's
// authenticator) answers under the prefix, and its errors are problem
// documents, not echo's {"message": ...}.
func TestModuleEmbedsInABareEchoUnderAPrefix(t *testing.T) {
	t.Parallel()
	const prefix = "/shop/boost"
	db := testbed.NewDatabase(t)
	m, err := boost.New(boost.Deps{
		DB: db.Gorm, Authenticate: testbed.AuthenticateTenantHeader(),
		Brokers: []string{"127.0.0.1:9"}, // the consumer is not started
		Logger:  slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	e := echo.New()
	m.RegisterRoutes(e.Group(prefix))

	get := func(path, tenant string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, prefix+path, nil)
		if tenant != "" {
			req.Header.Set(testbed.HeaderTestTenant, tenant)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	problem := func(rec *httptest.ResponseRecorder) map[string]any {
		t.Helper()
		require.Equal(t, httpserver.ProblemContentType, rec.Header().Get(echo.HeaderContentType), rec.Body.String())
		var p map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.EqualValues(t, rec.Code, p["status"])
		return p
	}
	target := "/api/developers/v1/promotion-boosts/Project/" + uuid.NewString()
	tenant := uuid.NewString()

	rec := get(target, tenant)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"boostWeight":0`)

	rec = get(strings.Replace(target, "Project", "Banner", 1), tenant)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	p := problem(rec)
	require.Equal(t, "https://pin.dev/problems/validation-failed", p["type"])
	require.NotEmpty(t, p["errors"])

	rec = get(target, "")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "https://pin.dev/problems/missing-token", problem(rec)["type"])
}
