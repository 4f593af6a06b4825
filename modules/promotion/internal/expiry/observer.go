package expiry

import "context"

// ExpireObserver reports an expiry cycle, which itself knows no telemetry
// (telemetry.ExpireTelemetry writes the logs, metrics and spans). Each
// method is called as its work starts, and returns the context the work
// runs under (so a span carries what follows) and end, which the cycle
// calls once with the work's outcome.
type ExpireObserver interface {
	// Cycle reports a cycle whose RunID and AsOf are set; end gets its
	// counts and duration, and the infrastructure error it ended on, if any.
	Cycle(ctx context.Context, cycle ExpireCycleResult, settings ExpireSettings) (_ context.Context, end func(ExpireCycleResult, error))
	// Batch reports a batch of at most limit rows; end gets what it
	// committed, or the error that rolled it back.
	Batch(ctx context.Context, limit int) (_ context.Context, end func(ExpireBatchResult, error))
}
