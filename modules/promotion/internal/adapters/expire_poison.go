package adapters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
)

// RememberPoison implements expiry.ExpireTx in promotion.expire_poison: one
// more failure, the last error and attempt.
func (t *expireTx) RememberPoison(ctx context.Context, asOf time.Time, failed []expiry.FailedExpiry) error {
	if len(failed) == 0 {
		return nil
	}
	ids, msgs := make([]uuid.UUID, len(failed)), make([]string, len(failed))
	for i, f := range failed {
		// A text column holds no NUL and no invalid UTF-8: an error echoing
		// such bytes must not turn into a fault of the whole batch.
		ids[i], msgs[i] = f.PurchaseID, strings.ToValidUTF8(strings.ReplaceAll(f.Err.Error(), "\x00", ""), "\uFFFD")
	}
	_, err := t.tx.ExecContext(ctx, rememberPoison, pgx.NamedArgs{"ids": uuidStrings(ids), "errors": msgs, "as_of": asOf})
	if err != nil {
		return fmt.Errorf("remember poison purchases: %w", err)
	}
	return nil
}

// rememberPoison counts one more failure of each purchase @ids[i], whose
// error was @errors[i], at @as_of.
const rememberPoison = `INSERT INTO promotion.expire_poison AS x
	(purchase_id, failures, last_error, first_failed_at, last_attempt_at)
SELECT v.id, 1, v.err, @as_of, @as_of FROM unnest(@ids::uuid[], @errors::text[]) AS v(id, err)
ON CONFLICT (purchase_id) DO UPDATE
SET failures = x.failures + 1, last_error = EXCLUDED.last_error, last_attempt_at = EXCLUDED.last_attempt_at`
