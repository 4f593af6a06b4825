package expiry

import "time"

// ExpireSettings are the expiry cycle's settings (PIN_EXPIRE_*, interfaces.md);
// their defaults live in platform/config, and the module fills them from there.
type ExpireSettings struct {
	// Interval is the time between the starts of two cycles.
	Interval time.Duration
	// BatchSize bounds one batch.
	BatchSize int
	// MaxBatchesPerCycle bounds the batches of a cycle; 0 means as many as
	// the budget allows. A further batch is taken only while the last one
	// was full.
	MaxBatchesPerCycle int
	// CycleBudget bounds when a cycle may start a batch: once the budget
	// is spent no new batch starts, but the batch in flight still commits.
	CycleBudget time.Duration
	// StopTimeout bounds how long a stop lets the batch in flight run on:
	// then its statement is cancelled on the server and it rolls back
	// whole. `pin serve` and `--once` give it half of PIN_SHUTDOWN_TIMEOUT.
	StopTimeout time.Duration
}
