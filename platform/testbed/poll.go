package testbed

import (
	"testing"
	"time"
)

// Eventually calls cond every few milliseconds until it returns nil, and
// fails tb with cond's last error once ForwardDeadline has passed. It polls
// in the caller's goroutine, so cond may use require (require.Eventually
// runs its condition in another goroutine, where FailNow must not be
// called).
func Eventually(tb testing.TB, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(ForwardDeadline)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testbed: still not after %s: %v", ForwardDeadline, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
