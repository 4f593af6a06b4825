package httpserver_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/httpserver"
)

// TestRenderProblemsOnABareEcho: on a host with echo's own error handler,
// a route behind RenderProblems still answers the problem documents of
// ADR-0003, a panic included, and the host's error handler never runs.
func TestRenderProblemsOnABareEcho(t *testing.T) {
	t.Parallel()
	e := echo.New()
	hostHandled := 0
	hostDefault := echo.DefaultHTTPErrorHandler(false)
	e.HTTPErrorHandler = func(c *echo.Context, err error) { hostHandled++; hostDefault(c, err) }
	g := e.Group("/mounted")
	g.GET("/missing", func(*echo.Context) error { return apperror.NotFound("thing-not-found", "No such thing.") },
		httpserver.RenderProblems())
	g.GET("/invalid", func(*echo.Context) error {
		return apperror.Invalid("Bad.", apperror.FieldError{Field: "name", Message: "is required"})
	}, httpserver.RenderProblems())
	g.GET("/panic", func(*echo.Context) error { panic("nil map in handler") }, httpserver.RenderProblems())
	g.GET("/unknown", func(*echo.Context) error { return errors.New("dial tcp 10.0.0.1: refused") }, httpserver.RenderProblems())

	for _, tc := range []struct {
		path   string
		status int
		slug   string
		fields int
	}{
		{"/mounted/missing", http.StatusNotFound, "thing-not-found", 0},
		{"/mounted/invalid", http.StatusUnprocessableEntity, apperror.SlugValidationFailed, 1},
		{"/mounted/panic", http.StatusInternalServerError, httpserver.SlugInternal, 0},
		{"/mounted/unknown", http.StatusInternalServerError, httpserver.SlugInternal, 0},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		require.Equal(t, tc.status, rec.Code, tc.path)
		p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
		require.Equal(t, httpserver.ProblemTypeBase+tc.slug, p.Type, tc.path)
		require.Equal(t, tc.status, p.Status, tc.path)
		require.Equal(t, tc.path, p.Instance, tc.path)
		require.Len(t, p.Errors, tc.fields, tc.path)
		require.NotContains(t, rec.Body.String(), "10.0.0.1", "a fault's text stays in the log")
	}
	require.Zero(t, hostHandled, "the module rendered every error itself")
}

// TestRenderProblemsDefersToNew: on a server built by New the error goes on
// to New's middleware, so the handler deadline still answers a dependency's
// transient failure with 503 and Retry-After rather than a 500.
func TestRenderProblemsDefersToNew(t *testing.T) {
	t.Parallel()
	transient := errors.New("connection refused")
	b := newTestBundle(t, httpserver.Config{Transient: func(err error) bool { return errors.Is(err, transient) }})
	b.e.GET("/db", func(*echo.Context) error { return transient }, httpserver.RenderProblems())

	rec := b.do(t, httptest.NewRequest(http.MethodGet, "/db", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	decodeProblem(t, rec.Header(), rec.Body.Bytes())
}
