package httpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/httpserver"
)

func TestProblemForEachKind(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		err    error
		status int
		typ    string
		detail string
	}{
		{"invalid", apperror.Invalid("targets are wrong"), 422, "validation-failed", "targets are wrong"},
		{"malformed", apperror.Malformed("bad json"), 400, "malformed-request", "bad json"},
		{"not found", apperror.NotFound("purchase-not-found", "no such purchase"), 404, "purchase-not-found", "no such purchase"},
		{"conflict", apperror.Conflict("purchase-not-cancellable", "already expired"), 409, "purchase-not-cancellable", "already expired"},
		{"unauthenticated", apperror.Unauthenticated("invalid-token", "bad token"), 401, "invalid-token", "bad token"},
		{"forbidden", apperror.Forbidden("admin-required", "admins only"), 403, "admin-required", "admins only"},
		{"too large", apperror.TooLarge("too big"), 413, "payload-too-large", "too big"},
		{"wrapped", fmt.Errorf("purchase.cancel: %w", apperror.Conflict("c", "d")), 409, "c", "d"},
		{"internal kind hides detail", &apperror.Error{Kind: apperror.KindInternal, Slug: "db", Detail: "pq: secret host"},
			500, "internal", "An internal error occurred. Quote the request id when reporting it."},
		{"echo 400 keeps message", echo.NewHTTPError(http.StatusBadRequest, "missing parameter"), 400, "malformed-request", "missing parameter"},
		{"echo 503 keeps status", echo.NewHTTPError(http.StatusServiceUnavailable, "db down at 10.0.0.5"),
			503, "service-unavailable", "An internal error occurred. Quote the request id when reporting it."},
		// v5's predefined errors carry only a status, no *echo.HTTPError.
		{"echo sentinel 404", echo.ErrNotFound, 404, "not-found", "No resource matches this path."},
		{"echo sentinel 403", fmt.Errorf("guard: %w", echo.ErrForbidden), 403, "forbidden", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBundle(t, httpserver.Config{})
			b.e.GET("/fail/:id", func(*echo.Context) error { return tt.err })

			req := httptest.NewRequest(http.MethodGet, "/fail/42?q=secret", nil)
			req.Header.Set(echo.HeaderXRequestID, "req-1")
			rec := b.do(t, req)

			require.Equal(t, tt.status, rec.Code)
			p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
			require.Equal(t, "https://pin.dev/problems/"+tt.typ, p.Type)
			require.Equal(t, http.StatusText(tt.status), p.Title)
			require.Equal(t, tt.status, p.Status)
			require.Equal(t, tt.detail, p.Detail)
			require.Equal(t, "/fail/42", p.Instance, "the query string is not echoed")
			require.Equal(t, "req-1", p.RequestID)
			require.NotContains(t, rec.Body.String(), "10.0.0.5")
			require.NotContains(t, rec.Body.String(), "secret")
			if tt.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="pin"`, rec.Header().Get(echo.HeaderWWWAuthenticate))
			}
		})
	}
}

func TestValidationProblemListsFields(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.POST("/with-fields", func(*echo.Context) error {
		return apperror.Invalid("The purchase is invalid.",
			apperror.FieldError{Field: "targets[0].targetKind", Message: "unknown target kind"},
			apperror.FieldError{Field: "packageId", Message: "must not be the nil UUID"})
	})
	b.e.POST("/without-fields", func(*echo.Context) error { return apperror.Invalid("no fields") })

	rec := b.do(t, httptest.NewRequest(http.MethodPost, "/with-fields", nil))
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, []map[string]string{
		{"field": "targets[0].targetKind", "message": "unknown target kind"},
		{"field": "packageId", "message": "must not be the nil UUID"},
	}, p.Errors)

	rec = b.do(t, httptest.NewRequest(http.MethodPost, "/without-fields", nil))
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	p = decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, []any{}, p.Raw["errors"], "a validation problem always carries the list")

	// Other kinds leave errors out entirely.
	b.e.GET("/conflict", func(*echo.Context) error { return apperror.Conflict("c", "d") })
	rec = b.do(t, httptest.NewRequest(http.MethodGet, "/conflict", nil))
	p = decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.NotContains(t, p.Raw, "errors")
}

func TestRouterErrorsAreProblems(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/x/:id", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })

	rec := b.do(t, httptest.NewRequest(http.MethodGet, "/nowhere/123", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, "https://pin.dev/problems/not-found", p.Type)
	require.Equal(t, "Not Found", p.Title)
	require.Equal(t, "/nowhere/123", p.Instance)

	rec = b.do(t, httptest.NewRequest(http.MethodDelete, "/x/123", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	p = decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, "https://pin.dev/problems/method-not-allowed", p.Type)
	require.Contains(t, rec.Header().Get(echo.HeaderAllow), http.MethodGet)
}

func TestUnknownErrorIsGeneric500AndLogged(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/boom", func(*echo.Context) error {
		return fmt.Errorf("purchase.get: %w", errors.New("pq: connection to 10.0.0.5 refused"))
	})

	req := httptest.NewRequest(http.MethodGet, "/boom", nil)
	req.Header.Set(echo.HeaderXRequestID, "trace-me")
	rec := b.do(t, req)

	require.Equal(t, http.StatusInternalServerError, rec.Code)
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, "https://pin.dev/problems/internal", p.Type)
	require.NotContains(t, rec.Body.String(), "10.0.0.5")

	logged := b.logs.Records(t, "http: internal error")
	require.Len(t, logged, 1)
	require.Equal(t, "purchase.get: pq: connection to 10.0.0.5 refused", logged[0]["error"])
	require.Equal(t, "trace-me", logged[0]["request_id"])
	require.NotEmpty(t, logged[0]["trace_id"])
}

func TestHeadErrorHasNoBody(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	rec := b.do(t, httptest.NewRequest(http.MethodHead, "/nowhere", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Empty(t, rec.Body.Bytes())
}

func TestClientClosedRequestIsNotA500(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/slow", func(c *echo.Context) error {
		<-c.Request().Context().Done()
		return fmt.Errorf("load: %w", c.Request().Context().Err())
	})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := b.do(t, httptest.NewRequestWithContext(ctx, http.MethodGet, "/slow", nil))

	require.Equal(t, httpserver.StatusClientClosedRequest, rec.Code)
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "/slow", "method": "GET", "status": "499"}))
	require.Empty(t, b.logs.Records(t, "http: internal error"))
}

func TestProblemCalledDirectly(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/direct", func(c *echo.Context) error {
		return httpserver.Problem(c, apperror.NotFound("package-not-found", "no such package"))
	})
	rec := b.do(t, httptest.NewRequest(http.MethodGet, "/direct", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.Equal(t, "https://pin.dev/problems/package-not-found", p.Type)
}

func TestStatusOfCoversEveryKind(t *testing.T) {
	t.Parallel()

	want := map[apperror.Kind]int{
		apperror.KindInternal: 500, apperror.KindInvalid: 422, apperror.KindMalformed: 400,
		apperror.KindNotFound: 404, apperror.KindConflict: 409, apperror.KindUnauthenticated: 401,
		apperror.KindForbidden: 403, apperror.KindTooLarge: 413, apperror.KindUnavailable: 503,
	}
	for kind, status := range want {
		require.Equal(t, status, httpserver.StatusOf(kind), kind.String())
	}
	require.Equal(t, 500, httpserver.StatusOf(apperror.Kind(99)))
	require.False(t, strings.HasPrefix(apperror.Kind(99).String(), "internal"))
}

// TestReadOnlyDatabaseIs503DatabaseReadOnly (ADR 0021): a write the
// database refused as read-only is 503 database-read-only with
// Retry-After, also when the deadline already took it for transient, and
// the server logs none of them: the pool logs the episode once.
func TestReadOnlyDatabaseIs503DatabaseReadOnly(t *testing.T) {
	t.Parallel()
	refused := errors.New("cannot execute INSERT in a read-only transaction")
	isRefused := func(err error) bool { return errors.Is(err, refused) }
	b := newTestBundle(t, httpserver.Config{Transient: isRefused, ReadOnly: isRefused, RetryAfter: 3 * time.Second})
	b.e.POST("/write", func(*echo.Context) error { return fmt.Errorf("purchase: %w", refused) })

	for range 3 {
		rec := b.do(t, httptest.NewRequest(http.MethodPost, "/write", nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "3", rec.Header().Get("Retry-After"))
		p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
		require.Equal(t, httpserver.ProblemTypeBase+apperror.SlugDatabaseReadOnly, p.Type)
		require.NotContains(t, p.Detail, "INSERT", "the cause stays out of the answer")
	}
	require.Empty(t, b.logs.Records(t, "http: dependency unavailable"))
	require.Empty(t, b.logs.Records(t, "http: internal error"))
}

// TestAdmitWriteAnswersAWriteWithoutHandlingIt (ADR 0031): while AdmitWrite
// refuses, a write to a route is answered from its error at once, its
// handler never run; reads and requests no route matched pass as before.
func TestAdmitWriteAnswersAWriteWithoutHandlingIt(t *testing.T) {
	t.Parallel()
	refused := errors.New("writes held back")
	isRefused := func(err error) bool { return errors.Is(err, refused) }
	var holding atomic.Bool
	holding.Store(true)
	b := newTestBundle(t, httpserver.Config{Transient: isRefused, ReadOnly: isRefused, RetryAfter: 3 * time.Second,
		AdmitWrite: func() error {
			if holding.Load() {
				return refused
			}
			return nil
		}})
	var handled atomic.Int64
	handle := func(c *echo.Context) error { handled.Add(1); return c.NoContent(http.StatusNoContent) }
	b.e.GET("/item", handle)
	b.e.POST("/item", handle)
	b.e.PATCH("/item", handle)
	b.e.DELETE("/item", handle)

	for _, method := range []string{http.MethodPost, http.MethodPatch, http.MethodDelete} {
		rec := b.do(t, httptest.NewRequest(method, "/item", nil))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, method)
		require.Equal(t, "3", rec.Header().Get("Retry-After"))
		require.Equal(t, httpserver.ProblemTypeBase+apperror.SlugDatabaseReadOnly, decodeProblem(t, rec.Header(), rec.Body.Bytes()).Type)
	}
	require.Zero(t, handled.Load(), "no write reached its handler")
	require.Equal(t, http.StatusNoContent, b.do(t, httptest.NewRequest(http.MethodGet, "/item", nil)).Code, "reads pass")
	require.Equal(t, http.StatusNotFound, b.do(t, httptest.NewRequest(http.MethodPost, "/nowhere", nil)).Code)
	require.Equal(t, http.StatusMethodNotAllowed, b.do(t, httptest.NewRequest(http.MethodPut, "/item", nil)).Code)
	require.Empty(t, b.logs.Records(t, "http: dependency unavailable"), "the watch names the episode")

	holding.Store(false)
	require.Equal(t, http.StatusNoContent, b.do(t, httptest.NewRequest(http.MethodPost, "/item", nil)).Code)
	require.EqualValues(t, 2, handled.Load())
}
