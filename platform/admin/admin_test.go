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

// TestServesProfilesUntilStopped takes the index, a heap profile and the
// goroutines from the admin listener, then stops it: the port is released.
func TestServesProfilesUntilStopped(t *testing.T) {
	t.Parallel()
	srv, err := admin.Listen(context.Background(), "127.0.0.1:0", slog.New(slog.DiscardHandler))
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
	code, _ = testbed.Get(t, base+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "the admin listener serves the profiles only")

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
	_, err = admin.Listen(context.Background(), ln.Addr().String(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "PIN_ADMIN_ADDR")
}
