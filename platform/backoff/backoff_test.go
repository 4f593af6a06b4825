package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJitterStaysWithinHalfAndAll(t *testing.T) {
	t.Parallel()
	require.Equal(t, 500*time.Millisecond, jitter(time.Second, 0))
	require.Equal(t, 750*time.Millisecond, jitter(time.Second, 0.5))
	require.Less(t, jitter(time.Second, 0.999999), time.Second+1)
	require.Equal(t, time.Duration(0), jitter(0, 0.5))
	require.Equal(t, time.Duration(1), jitter(1, 0.9), "one nanosecond has no half to spread")
}

// TestJitterSpreadsInstances: twenty instances that failed together do not
// all wait the same time (all twenty draws equal is as good as impossible).
func TestJitterSpreadsInstances(t *testing.T) {
	t.Parallel()
	waits := map[time.Duration]bool{}
	for range 20 {
		w := Jitter(time.Second)
		require.GreaterOrEqual(t, w, 500*time.Millisecond)
		require.LessOrEqual(t, w, time.Second)
		waits[w] = true
	}
	require.Greater(t, len(waits), 1)
}
