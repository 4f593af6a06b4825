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
	EventuallyWithin(tb, ForwardDeadline, cond)
}

// EventuallyWithin is Eventually with a deadline of its own, for a
// benchmark waiting on work that takes longer than a test's.
func EventuallyWithin(tb testing.TB, within time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testbed: still not after %s: %v", within, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
