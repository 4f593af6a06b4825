package adapters

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/postgres"
)

// purchaseColumns are the columns of purchaseModel in its field order, the
// order purchaseFields scans them (TestExpirePurchaseColumnsMatchModel).
var purchaseColumns = []string{
	"id", "tenant_id", "package_id", "package_code", "package_kind", "boost_weight",
	"price_amount", "currency_id", "currency_iso_code", "currency_name", "currency_sign",
	"status", "payment_status", "starts_at", "ends_at", "cancel_reason",
	"created_by_user_id", "updated_by_user_id", "created_at", "updated_at", "version",
}

// purchaseFields are the scan destinations of purchaseColumns in m: its
// fields in order, taken from the model so the list is not written twice.
func purchaseFields(m *purchaseModel) []any {
	v := reflect.ValueOf(m).Elem()
	out := make([]any, v.NumField())
	for i := range out {
		out[i] = v.Field(i).Addr().Interface()
	}
	return out
}

// The expiry's selection, as named literal queries (sql/*.sql).
var (
	//go:embed sql/expire_select_batch.sql
	selectBatchQuery string
	//go:embed sql/expire_count_skipped.sql
	countSkippedQuery string
)

// batchSelection is what selectBatch locked.
type batchSelection struct {
	rows    []purchaseModel
	targets map[uuid.UUID][]targetModel
	retries map[uuid.UUID]bool // the known poison retried
	kept    int                // places kept for poison (0 or 1)
	skipped int
}

// selectBatch runs selectBatchQuery (sql/expire_select_batch.sql). Without
// a row it cannot carry the skipped count, which is then asked for alone.
func selectBatch(ctx context.Context, tx postgres.Tx, b expiry.ExpireBatch) (batchSelection, error) {
	exclude := uuidStrings(b.Exclude)
	rows, err := tx.QueryContext(ctx, selectBatchQuery, pgx.NamedArgs{
		"as_of": b.AsOf, "exclude": exclude, "batch_limit": b.Limit, "poison_retries": b.RetryPoison})
	if err != nil {
		return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
	}
	defer rows.Close()
	sel := batchSelection{rows: make([]purchaseModel, 0, b.Limit), targets: make(map[uuid.UUID][]targetModel, b.Limit),
		retries: map[uuid.UUID]bool{}}
	for rows.Next() {
		var m purchaseModel
		var slot int
		var sortAt time.Time
		var targets sql.NullString
		dest := append([]any{&slot, &sortAt}, purchaseFields(&m)...)
		if err := rows.Scan(append(dest, &targets, &sel.skipped, &sel.kept)...); err != nil {
			return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
		}
		sel.rows = append(sel.rows, m)
		if slot == 1 {
			sel.retries[m.ID] = true
		}
		if ts := parseTargets(m.ID, targets.String); ts != nil {
			sel.targets[m.ID] = ts
		}
	}
	if err := rows.Close(); err != nil {
		return batchSelection{}, fmt.Errorf("select due purchases: %w", err)
	}
	sel.skipped = max(sel.skipped, 0)
	if len(sel.rows) == 0 {
		rows, err := tx.QueryContext(ctx, countSkippedQuery, pgx.NamedArgs{
			"as_of": b.AsOf, "exclude": exclude, "batch_limit": b.Limit})
		if err != nil {
			return batchSelection{}, fmt.Errorf("count skipped-locked purchases: %w", err)
		}
		defer rows.Close()
		if rows.Next() {
			err = rows.Scan(&sel.skipped)
		}
		if err := errors.Join(err, rows.Close()); err != nil {
			return batchSelection{}, fmt.Errorf("count skipped-locked purchases: %w", err)
		}
	}
	return sel, nil
}

// parseTargets reads selectBatchQuery's "kind id,kind id". A target that
// does not parse keeps the whole text as its kind, so the purchase fails as
// a poison item (unknown kind), not the batch.
func parseTargets(purchaseID uuid.UUID, s string) []targetModel {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]targetModel, len(parts))
	for i, part := range parts {
		kind, id, _ := strings.Cut(part, " ")
		tid, err := uuid.Parse(id)
		if err != nil {
			kind = part
		}
		out[i] = targetModel{PurchaseID: purchaseID, TargetKind: kind, TargetID: tid, Position: int16(i)}
	}
	return out
}
