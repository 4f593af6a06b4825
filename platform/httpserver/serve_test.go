package httpserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/httpserver"
)

type serveResult struct {
	resp *http.Response
	body string
	err  error
}

// startServing runs ServeListener on a free port and returns its address
// and the channel of its result.
func startServing(tb testing.TB, ctx context.Context, e *echo.Echo, cfg httpserver.Config, grace time.Duration) (string, <-chan error) {
	tb.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	done := make(chan error, 1)
	go func() { done <- httpserver.ServeListener(ctx, ln, e, cfg, grace) }()
	return ln.Addr().String(), done
}

func get(ctx context.Context, url string) <-chan serveResult {
	out := make(chan serveResult, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			out <- serveResult{err: err}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- serveResult{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		out <- serveResult{resp: resp, body: string(body), err: err}
	}()
	return out
}

func TestServeLetsInFlightRequestFinish(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	started, release := make(chan struct{}), make(chan struct{})
	b.e.GET("/slow", func(c *echo.Context) error {
		close(started)
		<-release
		// The shutdown must not have cancelled the request's context.
		if err := c.Request().Context().Err(); err != nil {
			return err
		}
		return c.String(http.StatusOK, "done")
	})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, served := startServing(t, ctx, b.e, httpserver.Config{}, 10*time.Second)
	inFlight := get(t.Context(), "http://"+addr+"/slow")

	<-started
	cancel()
	// Shutdown has begun once the listener refuses new connections.
	require.Eventually(t, func() bool {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = conn.Close()
		}
		return err != nil
	}, 5*time.Second, 10*time.Millisecond)
	select {
	case err := <-served:
		t.Fatalf("ServeListener returned %v with a request in flight", err)
	default:
	}

	close(release)
	res := <-inFlight
	require.NoError(t, res.err)
	require.Equal(t, http.StatusOK, res.resp.StatusCode)
	require.Equal(t, "done", res.body)
	require.NoError(t, <-served)
}

func TestServeGivesUpAfterShutdownTimeout(t *testing.T) {
	t.Parallel()

	b := newTestBundle(t, httpserver.Config{})
	started := make(chan struct{})
	b.e.GET("/stuck", func(c *echo.Context) error {
		close(started)
		<-c.Request().Context().Done() // released only when the connection is closed
		return c.Request().Context().Err()
	})

	ctx, cancel := context.WithCancel(t.Context())
	addr, served := startServing(t, ctx, b.e, httpserver.Config{}, 200*time.Millisecond)
	inFlight := get(t.Context(), "http://"+addr+"/stuck")

	<-started
	begin := time.Now()
	cancel()
	err := <-served
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(begin), 5*time.Second)
	require.Error(t, (<-inFlight).err, "the stuck connection was closed")
}

func TestServeReportsListenError(t *testing.T) {
	t.Parallel()

	var lc net.ListenConfig
	taken, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })

	e := httpserver.New(httpserver.Config{}, nil, nil, nil)
	err = httpserver.Serve(t.Context(), e, httpserver.Config{Addr: taken.Addr().String()}, time.Second)
	require.ErrorContains(t, err, "listen on "+taken.Addr().String())
}

func TestServeAppliesTimeouts(t *testing.T) {
	t.Parallel()

	e := httpserver.New(httpserver.Config{}, nil, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, served := startServing(t, ctx, e, httpserver.Config{ReadHeaderTimeout: 100 * time.Millisecond}, time.Second)

	// A client that connects and never sends its headers (slowloris) is cut off.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	begin := time.Now()
	_, err = conn.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Less(t, time.Since(begin), 4*time.Second)

	cancel()
	require.NoError(t, <-served)
}

func TestConfig(t *testing.T) {
	t.Parallel()

	def := httpserver.DefaultConfig()
	require.Equal(t, "127.0.0.1:8080", def.Addr)
	require.Equal(t, "64KiB", def.BodyLimit)
	require.Positive(t, def.ReadTimeout)
	require.Positive(t, def.ReadHeaderTimeout)
	require.Positive(t, def.WriteTimeout)
	require.Positive(t, def.IdleTimeout)
	require.NoError(t, httpserver.Config{}.Validate())

	sizes := map[string]int64{"65536": 65536, "64K": 65536, "64KiB": 65536, "1M": 1 << 20, "2MiB": 2 << 20, "512B": 512}
	for in, want := range sizes {
		got, err := httpserver.ParseByteSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1", "64KB", "64 kilobytes", "1.5K", "K", "99999999999999M"} {
		_, err := httpserver.ParseByteSize(in)
		require.Error(t, err, in)
	}

	require.Error(t, httpserver.Config{BodyLimit: "lots"}.Validate())
	require.Error(t, httpserver.Config{WriteTimeout: -time.Second}.Validate())
	require.Panics(t, func() { httpserver.New(httpserver.Config{BodyLimit: "lots"}, nil, nil, nil) })
}
