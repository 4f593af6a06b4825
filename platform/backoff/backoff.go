// Package backoff is the project's one setting of
// github.com/cenkalti/backoff/v5 for its retry loops (the outbox relay, the
// host's runner restarts, the consumer's retries): doubling waits with
// "equal jitter", so instances that failed together (a broker or database
// outage ends for all at once) do not retry in step.
package backoff

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Doubling returns the waits of one retry loop: the n-th NextBackOff (from
// 0) is drawn from [d/2, d] with d = first·2ⁿ capped at most, so half the
// doubling's spacing stays as a floor and no wait exceeds most; Reset
// starts again at first. The library draws from c·[1-f, 1+f]: c = 3d/4 and
// f = 1/3 make that [d/2, d].
func Doubling(first, most time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     first * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         max(most, first) * 3 / 4,
	}
}
