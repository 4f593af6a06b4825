package main_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestProfilesOnlyOnTheAdminListener runs pin with PIN_ADMIN_ADDR: the
// profiles answer there, and the public listener knows no /debug/pprof/.
func TestProfilesOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	adminAddr := testbed.FreeAddr(t)
	s := startServer(t, []string{
		"PIN_DATABASE_URL=" + db.URL,
		"PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
		"PIN_DEV_KAFKA_ADDR=" + testbed.FreeAddr(t),
		"PIN_AUTH_JWT_SECRET=" + jwtSecret,
		"PIN_ADMIN_ADDR=" + adminAddr,
	}, "dev")

	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		code, body := testbed.Get(t, "http://"+adminAddr+path)
		require.Equal(t, http.StatusOK, code, "admin %s", path)
		require.NotEmpty(t, body, path)
		code, _ = testbed.Get(t, s.base+path)
		require.Equal(t, http.StatusNotFound, code, "public %s", path)
	}
	code, body := testbed.Get(t, "http://"+adminAddr+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "host.(*Host).Run", "the profile is of the running pin")
}
