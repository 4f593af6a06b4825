package expiry

import (
	"context"
	"fmt"
	"time"
)

// afterStop is ctx without its cancellation, cancelled only timeout after
// ctx is: a stop lets the batch in flight finish, but not forever.
// release frees its timer.
func afterStop(ctx context.Context, timeout time.Duration) (work context.Context, release func()) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopped := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(timeout, func() {
			cancel(fmt.Errorf("stopped: the batch in flight did not finish within the stop timeout (%s)", timeout))
		})
		context.AfterFunc(work, func() { t.Stop() })
	})
	return work, func() { stopped(); cancel(nil) }
}
