package testbed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pinmarket/pin/platform/host"
)

// StartRunner runs r until the test ends or stop is called. Like the host,
// it starts r again when r fails (a broker not reachable yet on a loaded
// machine), logging the error; an error returned on stop fails tb.
func StartRunner(tb testing.TB, r host.Runner) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for {
			err := r.Run(ctx)
			if ctx.Err() != nil {
				done <- err
				return
			}
			tb.Logf("testbed: runner %s failed, starting it again: %v", r.Name(), err)
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("testbed: runner %s stopped with an error: %v", r.Name(), err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}
