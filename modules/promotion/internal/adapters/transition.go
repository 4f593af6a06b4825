package adapters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/postgres"
)

// transition is a purchase after a domain transition (cancel, expire), not
// yet written, with the version it was loaded at.
type transition struct {
	purchase        *domain.Purchase
	previousVersion int64
}

// transitionColumn is a column of promotion_purchases that a transition
// writes, with how to read its values from rows as an array parameter.
type transitionColumn struct {
	name    string
	sqlType string
	values  func(rows []purchaseModel) any
}

// columnOf describes a column whose values value reads from a row; T must
// be a type pgx encodes as an element of sqlType[].
func columnOf[T any](name, sqlType string, value func(*purchaseModel) T) transitionColumn {
	return transitionColumn{name: name, sqlType: sqlType, values: func(rows []purchaseModel) any {
		out := make([]T, len(rows))
		for i := range rows {
			out[i] = value(&rows[i])
		}
		return out
	}}
}

// transitionColumns is every column a transition may change: the one list
// from which the single-row save (cancel) and the expiry batch build their
// statement. The rest of a purchase is fixed at creation;
// TestTransitionsChangeOnlyWrittenColumns fails when a domain transition
// starts to change a column missing here.
var transitionColumns = []transitionColumn{
	columnOf("status", "text", func(m *purchaseModel) string { return m.Status }),
	columnOf("payment_status", "text", func(m *purchaseModel) string { return m.PaymentStatus }),
	columnOf("starts_at", "timestamptz", func(m *purchaseModel) time.Time { return m.StartsAt }),
	columnOf("ends_at", "timestamptz", func(m *purchaseModel) time.Time { return m.EndsAt }),
	columnOf("cancel_reason", "text", func(m *purchaseModel) *string { return m.CancelReason }),
	columnOf("updated_by_user_id", "uuid", func(m *purchaseModel) *string { return nullUUIDText(m.UpdatedByUserID) }),
	columnOf("updated_at", "timestamptz", func(m *purchaseModel) time.Time { return m.UpdatedAt }),
	columnOf("version", "bigint", func(m *purchaseModel) int64 { return m.Version }),
}

// transitionUpdate is the statement that writes transitions: one UPDATE
// for any number of rows, each guarded by the version it was loaded at (a
// row that moved on is not returned). Its parameters are those of
// transitionArgs.
var transitionUpdate = buildTransitionUpdate(transitionColumns)

func buildTransitionUpdate(cols []transitionColumn) string {
	set := make([]string, len(cols))
	arrays := []string{"$1::uuid[]", "$2::bigint[]"}
	names := []string{"id", "previous_version"}
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = v.%s", c.name, c.name)
		arrays = append(arrays, fmt.Sprintf("$%d::%s[]", i+3, c.sqlType))
		names = append(names, c.name)
	}
	return `UPDATE ` + purchasesTable + ` AS p
SET ` + strings.Join(set, ", ") + `
FROM unnest(` + strings.Join(arrays, ", ") + `) AS v(` + strings.Join(names, ", ") + `)
WHERE p.id = v.id AND p.version = v.previous_version
RETURNING p.id`
}

// transitionArgs are transitionUpdate's parameters for ts.
func transitionArgs(ts []transition) []any {
	rows := make([]purchaseModel, len(ts))
	ids, prev := make([]string, len(ts)), make([]int64, len(ts))
	for i, t := range ts {
		rows[i], _ = toDBPurchase(t.purchase)
		ids[i], prev[i] = rows[i].ID.String(), t.previousVersion
	}
	args := []any{ids, prev}
	for _, c := range transitionColumns {
		args = append(args, c.values(rows))
	}
	return args
}

// writeTransitionSet runs transitionUpdate for ts and splits them into the
// rows it updated (their indexes) and those whose version had moved on.
func writeTransitionSet(ctx context.Context, tx postgres.Tx, ts []transition) ([]int, []app.FailedExpiry, error) {
	updated, err := queryIDs(ctx, tx, transitionUpdate, transitionArgs(ts))
	if err != nil {
		return nil, nil, fmt.Errorf("update purchases: %w", err)
	}
	written, failed := splitWritten(ts, updated)
	return written, failed, nil
}

// splitWritten tells the transitions written (updated holds their ids) from
// those whose version had moved on (ErrVersionConflict).
func splitWritten(ts []transition, updated map[uuid.UUID]bool) (written []int, failed []app.FailedExpiry) {
	for i, t := range ts {
		if updated[t.purchase.ID()] {
			written = append(written, i)
			continue
		}
		failed = append(failed, app.FailedExpiry{PurchaseID: t.purchase.ID(),
			Err: fmt.Errorf("purchase %s is no longer at version %d: %w", t.purchase.ID(), t.previousVersion, ErrVersionConflict)})
	}
	return written, failed
}

// queryIDs runs a statement that returns ids and collects them.
func queryIDs(ctx context.Context, tx postgres.Tx, query string, args []any) (map[uuid.UUID]bool, error) {
	rows, err := tx.Exec.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make(map[uuid.UUID]bool)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Close()
}

// nullUUIDText is the text form of a nullable uuid, nil for NULL.
func nullUUIDText(id uuid.NullUUID) *string {
	if !id.Valid {
		return nil
	}
	s := id.UUID.String()
	return &s
}
