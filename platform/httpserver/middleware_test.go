package httpserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/correlation"
	"github.com/pinmarket/pin/platform/httpserver"
)

func TestPanicBecomes500AndServerStaysUp(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/panic", func(*echo.Context) error { panic("nil map in handler") })
	b.e.GET("/ok", func(c *echo.Context) error { return c.String(http.StatusOK, "fine") })
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)

	client := srv.Client()
	for range 3 {
		resp, err := client.Get(srv.URL + "/panic")
		require.NoError(t, err)
		body := readAll(t, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		p := decodeProblem(t, resp.Header, body)
		require.Equal(t, "https://pin.dev/problems/internal", p.Type)
		require.NotContains(t, string(body), "nil map")
	}

	resp, err := client.Get(srv.URL + "/ok")
	require.NoError(t, err)
	require.Equal(t, "fine", string(readAll(t, resp.Body)))
	require.NoError(t, resp.Body.Close())

	logged := b.logs.Records(t, "http: internal error")
	require.Len(t, logged, 3, "each panic is logged once")
	require.Equal(t, "panic: nil map in handler", logged[0]["error"])
	require.Contains(t, logged[0]["stack"], "TestPanicBecomes500AndServerStaysUp.func1", "the stack names the panicking handler")
	require.NotEmpty(t, logged[0]["request_id"])
}

// A panic is a 500 whatever its value: Echo's Recover returns an error that
// unwraps to a panic's error value, which the problem handler would render
// with that error's status (here 404); recoverPanics hides it.
func TestPanicWithAnErrorValueIsStill500(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/panic", func(*echo.Context) error { panic(apperror.NotFound("thing-not-found", "no such thing")) })
	b.e.GET("/panic-echo", func(*echo.Context) error { panic(echo.ErrNotFound) })
	for _, path := range []string{"/panic", "/panic-echo"} {
		rec := b.do(t, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusInternalServerError, rec.Code, path)
		p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
		require.Equal(t, "https://pin.dev/problems/internal", p.Type, path)
		require.NotContains(t, rec.Body.String(), "no such thing", path)
	}
	logged := b.logs.Records(t, "http: internal error")
	require.Len(t, logged, 2)
	require.NotContains(t, logged[0]["error"], "goroutine", "the stack is its own field, not in the error")
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{BodyLimit: "1K"})
	handlerRan := make(chan struct{}, 10)
	// A handler that reads the body by itself, not through Bind.
	b.e.POST("/raw", func(c *echo.Context) error {
		handlerRan <- struct{}{}
		data, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.String(http.StatusOK, string(rune('0'+len(data)%10)))
	})
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)

	post := func(t *testing.T, body io.Reader, contentLength int64) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/raw", body)
		require.NoError(t, err)
		req.ContentLength = contentLength
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}

	t.Run("exactly the limit passes", func(t *testing.T) {
		resp := post(t, bytes.NewReader(make([]byte, 1024)), 1024)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("declared Content-Length over the limit is refused before the handler", func(t *testing.T) {
		for len(handlerRan) > 0 {
			<-handlerRan
		}
		resp := post(t, bytes.NewReader(make([]byte, 1025)), 1025)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		p := decodeProblem(t, resp.Header, readAll(t, resp.Body))
		require.Equal(t, "https://pin.dev/problems/payload-too-large", p.Type)
		require.Empty(t, handlerRan)
	})

	t.Run("chunked body without Content-Length over the limit", func(t *testing.T) {
		// A reader of unknown length makes the client send chunked encoding.
		body := io.MultiReader(strings.NewReader(strings.Repeat("a", 4096)))
		resp := post(t, body, -1)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		p := decodeProblem(t, resp.Header, readAll(t, resp.Body))
		require.Equal(t, "https://pin.dev/problems/payload-too-large", p.Type)
		require.Equal(t, "The request body is larger than 1024 bytes.", p.Detail)
	})

	// Over-limit requests are not internal errors.
	require.Empty(t, b.logs.Records(t, "http: internal error"))
}

func TestRequestID(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	var seen string
	b.e.GET("/id", func(c *echo.Context) error {
		seen = correlation.RequestID(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	})

	tests := []struct {
		name     string
		incoming string
		keep     bool
	}{
		{"sane incoming id is kept", "0f1e2d3c-aaaa-bbbb-cccc-123456789abc", true},
		{"other sane characters", "lb:abc_DEF.1/2+3=@x", true},
		{"missing id is generated", "", false},
		{"id with spaces is replaced", "hello world", false},
		{"id with quotes is replaced", `x"y`, false},
		{"overlong id is replaced", strings.Repeat("a", 129), false},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "/id", nil)
		if tt.incoming != "" {
			req.Header.Set(echo.HeaderXRequestID, tt.incoming)
		}
		rec := b.do(t, req)
		got := rec.Header().Get(echo.HeaderXRequestID)
		require.Equal(t, got, seen, tt.name)
		if tt.keep {
			require.Equal(t, tt.incoming, got, tt.name)
		} else {
			_, err := uuid.Parse(got)
			require.NoError(t, err, "%s: generated id %q", tt.name, got)
		}
	}

	// Every access log line carries the request id through the context.
	require.Len(t, b.logs.Records(t, "http request"), len(tests))
	for _, rec := range b.logs.Records(t, "http request") {
		require.NotEmpty(t, rec["request_id"])
		require.Equal(t, "/id", rec["route"])
	}
}

func TestProbeSuccessesLogAtDebug(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/healthz", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	b.e.GET("/readyz", func(c *echo.Context) error { return c.NoContent(http.StatusServiceUnavailable) })
	b.do(t, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	b.do(t, httptest.NewRequest(http.MethodGet, "/readyz", nil))

	levels := map[string]string{}
	for _, rec := range b.logs.Records(t, "http request") {
		levels[rec["route"].(string)] = rec["level"].(string)
	}
	require.Equal(t, map[string]string{"/healthz": "DEBUG", "/readyz": "WARN"}, levels)
}

func TestMetricsUseRouteTemplates(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/x/:id", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })

	for _, id := range []string{"123", "456", uuid.NewString()} {
		require.Equal(t, http.StatusNoContent, b.do(t, httptest.NewRequest(http.MethodGet, "/x/"+id, nil)).Code)
	}
	b.do(t, httptest.NewRequest(http.MethodGet, "/nope/123", nil))     // 404 from the router
	b.do(t, httptest.NewRequest(http.MethodGet, "/nope/456/abc", nil)) // another raw path, same label
	b.do(t, httptest.NewRequest(http.MethodDelete, "/x/123", nil))     // 405, c.Path() would say /x/:id
	b.do(t, httptest.NewRequest("BREW", "/x/123", nil))                // a method of the client's invention
	// Added after the first requests, as modules do after New.
	b.e.GET("/late/:id", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	b.do(t, httptest.NewRequest(http.MethodGet, "/late/9", nil))

	require.Equal(t, 3.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "/x/:id", "method": "GET", "status": "204"}))
	require.Equal(t, 2.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "unmatched", "method": "GET", "status": "404"}))
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "unmatched", "method": "DELETE", "status": "405"}))
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "unmatched", "method": "OTHER", "status": "405"}))
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "/late/:id", "method": "GET", "status": "200"}))

	h := findMetric(t, b.reg, "pin_http_request_duration_seconds", map[string]string{"route": "/x/:id", "method": "GET"})
	require.NotNil(t, h)
	require.Equal(t, uint64(3), h.GetHistogram().GetSampleCount())

	require.ElementsMatch(t, []string{"/x/:id", "unmatched", "/late/:id"},
		unique(labelValues(t, b.reg, "pin_http_request_duration_seconds", "route")))

	// A second server on the same registry shares the collectors.
	e2 := httpserver.New(httpserver.Config{}, nil, b.reg, nil)
	e2.GET("/x/:id", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })
	rec := httptest.NewRecorder()
	e2.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x/1", nil))
	require.Equal(t, 4.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "/x/:id", "method": "GET", "status": "204"}))
}

func TestTracingRecordsOneSpanPerRequest(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	var handlerSpan trace.SpanContext
	b.e.GET("/x/:id", func(c *echo.Context) error {
		handlerSpan = trace.SpanContextFromContext(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	})
	b.e.GET("/fail", func(*echo.Context) error { return io.ErrUnexpectedEOF })

	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := httptest.NewRequest(http.MethodGet, "/x/123", nil)
	req.Header.Set("traceparent", parent)
	b.do(t, req)
	b.do(t, httptest.NewRequest(http.MethodGet, "/fail", nil))
	b.do(t, httptest.NewRequest(http.MethodGet, "/nope/1", nil))

	spans := b.spans.Ended()
	require.Len(t, spans, 3)

	ok := spans[0]
	require.Equal(t, "GET /x/:id", ok.Name())
	require.Equal(t, trace.SpanKindServer, ok.SpanKind())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", ok.SpanContext().TraceID().String(), "incoming traceparent is honoured")
	require.Equal(t, ok.SpanContext(), handlerSpan, "the handler runs inside the span")
	attrs := attrMap(ok)
	require.Equal(t, "/x/:id", attrs["http.route"].AsString())
	require.Equal(t, int64(204), attrs["http.response.status_code"].AsInt64())

	failed := spans[1]
	require.Equal(t, "GET /fail", failed.Name())
	require.Equal(t, codes.Error, failed.Status().Code)
	require.Equal(t, int64(500), attrMap(failed)["http.response.status_code"].AsInt64())
	require.NotEmpty(t, failed.Events(), "the hidden cause is recorded on the span")

	require.Equal(t, "GET", spans[2].Name(), "no route, no template in the name")

	// The access log links to the trace.
	lines := b.logs.Records(t, "http request")
	require.Len(t, lines, 3)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", lines[0]["trace_id"])
}

// TestRouterAnswersKeepTheirLabels: Echo v5's router marks its own answers
// by route name and sets the request's pattern even when no route matched;
// labels and span names stay those of v4 (ADR 0018).
func TestRouterAnswersKeepTheirLabels(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/x/:id", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })
	b.e.GET("/wrapped", echo.WrapHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))

	rec := b.do(t, httptest.NewRequest(http.MethodDelete, "/x/1", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "OPTIONS, GET", rec.Header().Get(echo.HeaderAllow))

	rec = b.do(t, httptest.NewRequest(http.MethodHead, "/x/1", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "HEAD is not served by the GET route")
	require.Equal(t, "OPTIONS, GET", rec.Header().Get(echo.HeaderAllow))
	require.Empty(t, rec.Body.Bytes())

	rec = b.do(t, httptest.NewRequest(http.MethodOptions, "/x/1", nil))
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Equal(t, "OPTIONS, GET", rec.Header().Get(echo.HeaderAllow))

	require.Equal(t, http.StatusNoContent, b.do(t, httptest.NewRequest(http.MethodGet, "/wrapped", nil)).Code)

	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "unmatched", "method": "DELETE", "status": "405"}))
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "unmatched", "method": "HEAD", "status": "405"}))
	require.Equal(t, 1.0, counterValue(t, b.reg, "pin_http_requests_total",
		map[string]string{"route": "/x/:id", "method": "OPTIONS", "status": "204"}), "the router's OPTIONS answer keeps the route")

	var names []string
	for _, s := range b.spans.Ended() {
		names = append(names, s.Name())
	}
	require.Equal(t, []string{"DELETE", "HEAD", "OPTIONS /x/:id", "GET /wrapped"}, names)
	require.Equal(t, "/wrapped", attrMap(b.spans.Ended()[3])["http.route"].AsString())
}

func attrMap(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func unique(values []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range values {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// TestDeadlineAnswers503: a handler that runs out of its timeout answers
// 503 with Retry-After and the request id; an application error keeps its
// status, even one that wraps the cancellation (the request's context is
// not taken for a client that went away); a client that went away is 499.
func TestDeadlineAnswers503(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t, httpserver.Config{HandlerTimeout: 20 * time.Millisecond})
	b.e.GET("/deadline", func(c *echo.Context) error {
		<-c.Request().Context().Done()
		return c.Request().Context().Err()
	})
	b.e.GET("/conflict", func(c *echo.Context) error {
		<-c.Request().Context().Done()
		return &apperror.Error{Kind: apperror.KindConflict, Slug: "busy", Detail: "Held elsewhere.",
			Err: fmt.Errorf("lock wait: %w", context.Canceled)}
	})
	req := httptest.NewRequest(http.MethodGet, "/deadline", nil)
	req.Header.Set(echo.HeaderXRequestID, "deadline-1")
	rec := b.do(t, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, "deadline-1", decodeProblem(t, rec.Header(), rec.Body.Bytes()).RequestID)

	rec = b.do(t, httptest.NewRequest(http.MethodGet, "/conflict", nil))
	require.Equal(t, http.StatusConflict, rec.Code)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	rec = b.do(t, httptest.NewRequestWithContext(gone, http.MethodGet, "/deadline", nil))
	require.Equal(t, httpserver.StatusClientClosedRequest, rec.Code)
}
