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
	s := startDev(t, db, "PIN_SHUTDOWN_DRAIN=3s")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	// Polled on the test's goroutine: a refused connection before the 503
	// fails the test (the listener closed without a drain).
	deadline := time.Now().Add(3 * time.Second)
	for {
		resp, err := http.Get(s.base + "/readyz")
		require.NoError(t, err, "the listener is open through the drain")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			require.JSONEq(t, `{"status":"not ready","reason":"shutting_down"}`, string(body))
			break
		}
		require.True(t, time.Now().Before(deadline), "/readyz never answered 503 during the drain")
		time.Sleep(20 * time.Millisecond)
	}
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
