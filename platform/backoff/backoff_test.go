package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDoublingWaitsWithinHalfAndAll: each wait lies in [d/2, d] for the
// doubling d, capped at most, and Reset starts again at first.
func TestDoublingWaitsWithinHalfAndAll(t *testing.T) {
	t.Parallel()
	for range 200 {
		b := Doubling(time.Second, 8*time.Second)
		for _, d := range []time.Duration{1, 2, 4, 8, 8, 8} {
			w := b.NextBackOff()
			require.GreaterOrEqual(t, w, d*time.Second/2)
			require.LessOrEqual(t, w, d*time.Second)
		}
		b.Reset()
		w := b.NextBackOff()
		require.GreaterOrEqual(t, w, time.Second/2)
		require.LessOrEqual(t, w, time.Second)
	}
}

// TestDoublingSpreadsInstances: twenty instances that failed together do
// not all wait the same time (all twenty draws equal is as good as
// impossible).
func TestDoublingSpreadsInstances(t *testing.T) {
	t.Parallel()
	waits := map[time.Duration]bool{}
	for range 20 {
		waits[Doubling(time.Second, time.Minute).NextBackOff()] = true
	}
	require.Greater(t, len(waits), 1)
}
