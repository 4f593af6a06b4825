package promotiontest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// ExpireRun runs one expiry cycle of one instance of the job and says what
// it expired and what it skipped because another transaction held the row.
type ExpireRun func() (expired, skippedLocked int, err error)

// DrainConcurrently runs every instance in a goroutine of its own, over and
// over, until a cycle of it finds nothing to do (nothing expired, nothing
// skipped) — as instances of the job on several machines would drain a
// backlog. It fails tb on any instance's error and returns the sums over
// all cycles.
func DrainConcurrently(tb testing.TB, instances ...ExpireRun) (expired, skippedLocked int) {
	tb.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(instances))
	for _, run := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, s, err := run()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				expired += e
				skippedLocked += s
				mu.Unlock()
				if e == 0 && s == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err)
	}
	return expired, skippedLocked
}
