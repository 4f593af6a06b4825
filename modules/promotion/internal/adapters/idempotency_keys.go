package adapters

import (
	"context"
	"fmt"
	"time"
)

// DeleteIdempotencyKeysBefore deletes up to limit idempotency keys created
// before cutoff and reports how many it deleted. Small batches keep each
// statement short; the caller repeats until fewer than limit are gone.
func (r *PurchaseRepository) DeleteIdempotencyKeysBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res := r.db.WithContext(ctx).Exec(`
		DELETE FROM promotion.idempotency_keys
		WHERE (tenant_id, key) IN (
			SELECT tenant_id, key FROM promotion.idempotency_keys
			WHERE created_at < ?
			ORDER BY created_at
			LIMIT ?
		)`, cutoff, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("delete idempotency keys before %s: %w", cutoff.Format(time.RFC3339), res.Error)
	}
	return res.RowsAffected, nil
}
