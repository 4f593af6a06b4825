package admin_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/admin"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestServesProfilesUntilStopped takes the index, a heap profile, the
// goroutines and the metrics from the admin listener, then stops it: the
// port is released.
func TestServesProfilesUntilStopped(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pin_build_info 1\n")) })
	srv, err := admin.Listen(context.Background(), "127.0.0.1:0", metrics, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	stop := testbed.StartRunner(t, srv)
	base := "http://" + srv.Addr()

	code, body := testbed.Get(t, base+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, body = testbed.Get(t, base+"/debug/pprof/heap?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "heap profile")
	code, body = testbed.Get(t, base+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "admin.(*Server).Run", "the server's own goroutine is in the dump")
	code, body = testbed.Get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "pin_build_info 1\n", body)
	code, _ = testbed.Get(t, base+"/")
	require.Equal(t, http.StatusNotFound, code, "the admin listener serves the profiles and metrics only")

	stop()
	_, err = net.Dial("tcp", srv.Addr())
	require.Error(t, err, "stopped: nothing listens on the admin address")
}

// TestATakenAddressFailsAtStartNamingTheVariable is what makes a bad
// PIN_ADMIN_ADDR stop `pin serve` before it takes work.
func TestATakenAddressFailsAtStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	_, err = admin.Listen(context.Background(), ln.Addr().String(), http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "PIN_ADMIN_ADDR")
}

// TestAnAddressWithoutAHostBindsLoopback: ":0" listens on 127.0.0.1, not on
// every interface as net.Listen would.
func TestAnAddressWithoutAHostBindsLoopback(t *testing.T) {
	t.Parallel()
	srv, err := admin.Listen(context.Background(), ":0", http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	testbed.StartRunner(t, srv)
	host, _, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr, want string
		loopback   bool
	}{
		{":6060", "127.0.0.1:6060", true},
		{"127.0.0.1:6060", "127.0.0.1:6060", true},
		{"127.3.2.1:6060", "127.3.2.1:6060", true},
		{"[::1]:6060", "[::1]:6060", true},
		{"localhost:6060", "localhost:6060", true},
		{"0.0.0.0:6060", "0.0.0.0:6060", false},
		{"[::]:6060", "[::]:6060", false},
		{"10.1.2.3:6060", "10.1.2.3:6060", false},
		{"pin-admin.internal:6060", "pin-admin.internal:6060", false},
	}
	for _, tt := range tests {
		got, loopback, err := admin.Resolve(tt.addr)
		require.NoError(t, err, tt.addr)
		require.Equal(t, tt.want, got, tt.addr)
		require.Equal(t, tt.loopback, loopback, tt.addr)
	}
	_, _, err := admin.Resolve("6060")
	require.Error(t, err)
}
