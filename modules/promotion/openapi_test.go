package promotion_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/postgres"
)

// TestRoutesMatchOpenAPI checks both directions over every route the host
// serves (its probes, this module's routes and the reference boost
// projection's): each is a documented operation, and each documented
// operation is served.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := loadOpenAPI()
	require.NoError(t, err)
	b, _ := newHostBundle(t)

	var registered []string
	for _, r := range b.e.Router().Routes() {
		if strings.HasPrefix(r.Method, "echo_") { // echo's own not-found helpers
			continue
		}
		registered = append(registered, r.Method+" "+echoPathToOpenAPI(r.Path))
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	require.Equal(t, documented, registered)
	require.Len(t, registered, 11)
	require.Contains(t, registered, "GET /api/developers/v1/promotion-boosts/{targetKind}/{targetId}")
	require.Contains(t, registered, "GET /readyz")
}

// TestHostRoutesAnswerAsDocumented serves the probes and the boost route,
// and checks each answer against the OpenAPI document (b.do).
func TestHostRoutesAnswerAsDocumented(t *testing.T) {
	t.Parallel()
	b, notReady := newHostBundle(t)
	tenant := b.tenantToken(t, uuid.New())
	boostPath := "/api/developers/v1/promotion-boosts/Project/" + uuid.NewString()

	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/healthz"}).status)
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/readyz"}).status)
	notReady.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, b.do(t, request{method: http.MethodGet, path: "/readyz"}).status)
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/metrics"}).status)

	var boost map[string]any
	res := b.do(t, request{method: http.MethodGet, path: boostPath, token: tenant})
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &boost)
	require.EqualValues(t, 0, boost["boostWeight"])
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: boostPath, token: b.adminToken(t)}).status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, request{method: http.MethodGet,
		path: "/api/developers/v1/promotion-boosts/Planet/" + uuid.NewString(), token: tenant}).status)
	require.Equal(t, http.StatusUnauthorized, b.do(t, request{method: http.MethodGet, path: boostPath}).status)
	require.Equal(t, http.StatusForbidden, b.do(t, request{method: http.MethodGet, path: boostPath,
		token: b.token(t, auth.Principal{UserID: uuid.New()})}).status)
}

// newHostBundle is a testBundle whose server is wired as `pin serve`
// wires the host's HTTP side: the probes, then this module and the
// reference boost projection through host.AddModule. /readyz answers 503
// once notReady is set.
func newHostBundle(t *testing.T) (b *testBundle, notReady *atomic.Bool) {
	t.Helper()
	b = newTestBundle(t)
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	b.e = httpserver.New(httpserver.Config{Transient: postgres.IsTransient, ReadOnly: postgres.IsReadOnly}, logger, reg, noop.NewTracerProvider())
	h, err := host.New(host.Config{}, b.e, nil, logger, reg)
	require.NoError(t, err)
	notReady = new(atomic.Bool)
	host.RegisterProbes(b.e, func(context.Context) error {
		if notReady.Load() {
			return errors.New("database unreachable")
		}
		return nil
	}, reg, logger)
	h.AddModule(b.module)
	projection, err := boost.New(boost.Deps{DB: b.db.Gorm, Authenticate: b.authn.Middleware(),
		Brokers: []string{"127.0.0.1:1"}, Registerer: reg, Logger: logger}) // its consumer never runs here
	require.NoError(t, err)
	h.AddModule(projection)
	return b, notReady
}

// echoPathToOpenAPI turns /a/:id/b into /a/{id}/b.
func echoPathToOpenAPI(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if name, ok := strings.CutPrefix(part, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

func TestEchoPathToOpenAPI(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/a/{id}/b/{x}", echoPathToOpenAPI("/a/:id/b/:x"))
	require.Equal(t, "/a/b", echoPathToOpenAPI("/a/b"))
}

// TestOpenAPIValidationCanFail proves that the response check used by every
// API test rejects what it should: otherwise those tests would pass
// vacuously.
func TestOpenAPIValidationCanFail(t *testing.T) {
	t.Parallel()
	get := request{method: http.MethodGet, path: purchasePath(uuid.NewString())}
	json := http.Header{echo.HeaderContentType: []string{echo.MIMEApplicationJSON}}
	problem := http.Header{echo.HeaderContentType: []string{"application/problem+json"}}

	tests := []struct {
		name string
		req  request
		res  response
	}{
		{"undocumented status", get, response{status: http.StatusTeapot, header: problem,
			body: []byte(`{"type":"x","title":"t","status":418}`)}},
		{"missing required field", get, response{status: http.StatusOK, header: json, body: []byte(`{"id":"x"}`)}},
		{"nextCursor of the wrong type", request{method: http.MethodGet, path: purchasesPath}, response{status: http.StatusOK, header: json,
			body: []byte(`{"items":[],"nextCursor":5}`)}},
		{"problem without title", get, response{status: http.StatusNotFound, header: problem, body: []byte(`{"type":"x","status":404}`)}},
		{"validation problem without errors", request{method: http.MethodPost, path: purchasesPath}, response{
			status: http.StatusUnprocessableEntity, header: problem, body: []byte(`{"type":"x","title":"t","status":422}`)}},
		{"undocumented route", request{method: http.MethodDelete, path: purchasesPath}, response{status: http.StatusOK, header: json, body: []byte(`{}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, openAPIMismatch(tt.req, tt.res))
		})
	}
	ok := response{status: http.StatusOK, header: json, body: []byte(`{"items":[],"nextCursor":null}`)}
	require.NoError(t, openAPIMismatch(request{method: http.MethodGet, path: purchasesPath}, ok), "the baseline passes")
}
