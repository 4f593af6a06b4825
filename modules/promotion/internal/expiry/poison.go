package expiry

import "fmt"

// PoisonRetries is how many known poison purchases the n-th batch (from 0)
// of a cycle's store retries at most, with limit: a tenth of the batch, at
// least one. One place is kept for them even while due purchases fill
// every batch, so poison is retried at every batch, and a batch never
// holds more than limit; a batch of one keeps it every second batch (odd
// n), so the due purchases move too.
func PoisonRetries(limit int, n uint64) int {
	if limit <= 1 && n%2 == 0 {
		return 0
	}
	return max(limit/10, 1)
}

// RefusedAlikeError fails a batch whose due purchases PostgreSQL all
// refused the same way: one constraint or trigger refusing every row is a
// fault of the schema (a bad migration), not of each row's data.
type RefusedAlikeError struct {
	// Rows is how many due purchases were refused.
	Rows int
	// Refusal is what refused them all (SQLSTATE, table, constraint).
	Refusal string
	// Err is the first row's error.
	Err error
}

// Error says how many rows, what refused them and the first row's error.
func (e *RefusedAlikeError) Error() string {
	return fmt.Sprintf("all %d due purchases of the batch were refused alike (%s), a fault of the schema, not of the rows: %v", e.Rows, e.Refusal, e.Err)
}

// Unwrap returns the first row's error.
func (e *RefusedAlikeError) Unwrap() error { return e.Err }

// RefusedAlike is the rule that keeps a bad migration from quarantining
// the backlog as poison: when at least two due purchases reached
// PostgreSQL (tried) and every one of them was refused with one and the
// same Refusal, it returns a *RefusedAlikeError, which fails the batch as
// a fault; otherwise nil, and the refused rows are poison. A batch of one
// cannot tell and keeps it as poison.
func RefusedAlike(tried int, refused []FailedExpiry) error {
	if tried < 2 || len(refused) != tried || refused[0].Refusal == "" {
		return nil
	}
	for _, f := range refused[1:] {
		if f.Refusal != refused[0].Refusal {
			return nil
		}
	}
	return &RefusedAlikeError{Rows: tried, Refusal: refused[0].Refusal, Err: refused[0].Err}
}
