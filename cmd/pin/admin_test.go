package main_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestProfilesOnlyOnTheAdminListener runs pin with PIN_ADMIN_ADDR=:port: it
// binds loopback only, the profiles and the metrics answer there, and the
// public listener knows no /debug/pprof/ (and, with PIN_METRICS_PUBLIC=false,
// no /metrics).
func TestProfilesOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	port := strconv.Itoa(testbed.FreePort(t))
	adminAddr := "127.0.0.1:" + port
	s := startDev(t, db, "PIN_ADMIN_ADDR=:"+port, "PIN_METRICS_PUBLIC=false")

	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/metrics"} {
		code, body := testbed.Get(t, "http://"+adminAddr+path)
		require.Equal(t, http.StatusOK, code, "admin %s", path)
		require.NotEmpty(t, body, path)
		code, _ = testbed.Get(t, s.base+path)
		require.Equal(t, http.StatusNotFound, code, "public %s", path)
	}
	code, body := testbed.Get(t, "http://"+adminAddr+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "host.(*Host).Run", "the profile is of the running pin")
	code, body = testbed.Get(t, "http://"+adminAddr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "pin_build_info{")
	require.Contains(t, s.out.String(), `"addr":"`+adminAddr+`"`, "the start log names the loopback address")
	require.NotContains(t, s.out.String(), "admin listener reachable from the network")

	// Every other address of this machine refuses the port.
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		ipNet, ok := a.(*net.IPNet)
		if !ok || ipNet.IP.IsLoopback() || ipNet.IP.IsLinkLocalUnicast() {
			continue
		}
		conn, err := net.Dial("tcp", net.JoinHostPort(ipNet.IP.String(), port))
		if err == nil {
			conn.Close()
		}
		require.Error(t, err, "the admin port answers on %s", ipNet.IP)
	}
}

// TestARemoteAdminListenerIsOptedInAndWarned: with PIN_ADMIN_ALLOW_REMOTE
// the wildcard address is served, and the start log warns of it.
func TestARemoteAdminListenerIsOptedInAndWarned(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	port := strconv.Itoa(testbed.FreePort(t))
	s := startDev(t, db, "PIN_ADMIN_ADDR=0.0.0.0:"+port, "PIN_ADMIN_ALLOW_REMOTE=true")
	code, _ := testbed.Get(t, "http://127.0.0.1:"+port+"/metrics")
	require.Equal(t, http.StatusOK, code)
	code, _ = testbed.Get(t, s.base+"/metrics")
	require.Equal(t, http.StatusOK, code, "/metrics stays on the public port by default")
	require.Contains(t, s.out.String(), `"level":"WARN","msg":"admin listener reachable from the network`)
}
