// Package backoff spreads retry waits: instances that failed together (a
// broker or database outage ends for all at once) must not retry in step.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter returns a random wait in [d/2, d]: "equal jitter", which keeps
// half the doubling's spacing as a floor and never waits longer than the
// caller's bound.
func Jitter(d time.Duration) time.Duration {
	return jitter(d, rand.Float64())
}

// jitter is Jitter with the random number r in [0, 1) given.
func jitter(d time.Duration, r float64) time.Duration {
	if d <= 0 {
		return d
	}
	half := d / 2
	return d - half + time.Duration(r*float64(half))
}
