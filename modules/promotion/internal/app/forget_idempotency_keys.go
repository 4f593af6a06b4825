package app

import (
	"context"
	"fmt"
	"time"
)

// IdempotencyKeyRetention is how long an Idempotency-Key is remembered at
// least (interfaces.md: at least 24 hours).
const IdempotencyKeyRetention = 24 * time.Hour

// forgetBatchSize bounds one DELETE, so cleaning never holds many row locks
// or one long statement.
const forgetBatchSize = 1000

// ForgetIdempotencyKeysHandler deletes idempotency keys older than
// IdempotencyKeyRetention. After that a key is free: the same key buys anew.
type ForgetIdempotencyKeysHandler struct {
	keys PurchaseRepository
	now  func() time.Time
}

// NewForgetIdempotencyKeysHandler returns the handler; now is time.Now when
// nil.
func NewForgetIdempotencyKeysHandler(keys PurchaseRepository, now func() time.Time) ForgetIdempotencyKeysHandler {
	if now == nil {
		now = time.Now
	}
	return ForgetIdempotencyKeysHandler{keys: keys, now: now}
}

// Handle deletes the expired keys batch by batch and returns how many went.
func (h ForgetIdempotencyKeysHandler) Handle(ctx context.Context) (int64, error) {
	cutoff := h.now().Add(-IdempotencyKeyRetention)
	var total int64
	for {
		n, err := h.keys.DeleteIdempotencyKeysBefore(ctx, cutoff, forgetBatchSize)
		total += n
		if err != nil {
			return total, fmt.Errorf("forget idempotency keys: %w", err)
		}
		if n < forgetBatchSize {
			return total, nil
		}
	}
}
