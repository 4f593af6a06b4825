package httpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/httpserver"
)

// Amplification (ADR 0005): what a client sends is not echoed or logged
// back at its full size.

func TestLongPathIsNotEchoedOrLoggedInFull(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t, httpserver.Config{})
	path := "/" + strings.Repeat("a", 12<<10)

	rec := b.do(t, httptest.NewRequest(http.MethodGet, path, nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Less(t, rec.Body.Len(), 1<<10, "the 404 body does not carry the 12 KiB path")
	p := decodeProblem(t, rec.Header(), rec.Body.Bytes())
	require.True(t, strings.HasPrefix(p.Instance, "/aaa"), p.Instance)
	require.LessOrEqual(t, len(p.Instance), httpserver.MaxEchoedPathBytes)

	lines := b.logs.Records(t, "http request")
	require.Len(t, lines, 1)
	require.LessOrEqual(t, len(lines[0]["path"].(string)), httpserver.MaxEchoedPathBytes)
}

func TestHeadersOverTheCapAre431(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t, httpserver.Config{})
	b.e.GET("/ok", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, _ := startServing(t, ctx, b.e, httpserver.Config{}, time.Second)

	send := func(headerBytes int) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/ok", nil)
		require.NoError(t, err)
		req.Header.Set("X-Padding", strings.Repeat("p", headerBytes))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, send(8<<10))
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, send(httpserver.DefaultMaxHeaderBytes+8<<10),
		"net/http's default would take a megabyte")
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", httpserver.Truncate("abc", 3))
	require.Equal(t, "a…", httpserver.Truncate("abcdef", 4))
	require.Equal(t, "…", httpserver.Truncate("яяя", 4), "never cuts a rune in half")
}
