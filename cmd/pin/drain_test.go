package main_test

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestReadyzAnswers503FromSIGTERMUntilTheListenerCloses: with
// PIN_SHUTDOWN_DRAIN, SIGTERM turns /readyz to 503 "shutting_down" while the
// process still answers, and the process exits 0 after the drain.
func TestReadyzAnswers503FromSIGTERMUntilTheListenerCloses(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	s := startServer(t, []string{
		"PIN_DATABASE_URL=" + db.URL,
		"PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
		"PIN_DEV_KAFKA_ADDR=" + testbed.FreeAddr(t),
		"PIN_AUTH_JWT_SECRET=" + jwtSecret,
		"PIN_SHUTDOWN_DRAIN=3s",
	}, "dev")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/readyz")
		require.NoError(t, err, "the listener is open through the drain")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 3*time.Second, 20*time.Millisecond, "/readyz never answered 503 during the drain")
	require.JSONEq(t, `{"status":"not ready","reason":"shutting_down"}`, body)
	code, _ := testbed.Get(t, s.base+"/healthz")
	require.Equal(t, http.StatusOK, code, "alive while draining")

	select {
	case <-s.waited:
		s.waited <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("pin did not stop after the drain")
	}
	require.Equal(t, 0, s.cmd.ProcessState.ExitCode())
	require.Contains(t, s.out.String(), `"msg":"stop requested: draining, /readyz answers 503"`)
}
