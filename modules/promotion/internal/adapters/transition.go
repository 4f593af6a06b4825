package adapters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/postgres"
)

// transition is a purchase after a domain transition (cancel, expire), not
// yet written, with the version it was loaded at, when the caller kept it,
// the row it was loaded from, and its event (what the row keeps of it).
type transition struct {
	purchase        *domain.Purchase
	previousVersion int64
	loaded          *purchaseModel // nil: every transition column is written
	event           lastEvent
}

// transitionColumn is a column of promotion_purchases that a transition
// writes, with how to read its values from rows as an array parameter and
// whether two rows hold the same value.
type transitionColumn struct {
	name    string
	sqlType string
	values  func(rows []purchaseModel) any
	same    func(a, b *purchaseModel) bool
}

// columnOf describes a column whose values value reads from a row; T must
// be a type pgx encodes as an element of sqlType[].
func columnOf[T any](name, sqlType string, value func(*purchaseModel) T, same func(a, b T) bool) transitionColumn {
	return transitionColumn{name: name, sqlType: sqlType,
		values: func(rows []purchaseModel) any {
			out := make([]T, len(rows))
			for i := range rows {
				out[i] = value(&rows[i])
			}
			return out
		},
		same: func(a, b *purchaseModel) bool { return same(value(a), value(b)) },
	}
}

func equal[T comparable](a, b T) bool { return a == b }

func sameInstant(a, b time.Time) bool { return a.Equal(b) }

func sameNullable[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// transitionColumns is every column a transition may change: the one list
// from which the single-row save (cancel) and the expiry batch build their
// statement. The rest of a purchase is fixed at creation;
// TestTransitionsChangeOnlyWrittenColumns fails when a domain transition
// starts to change a column missing here.
var transitionColumns = []transitionColumn{
	columnOf("status", "text", func(m *purchaseModel) string { return m.Status }, equal),
	columnOf("payment_status", "text", func(m *purchaseModel) string { return m.PaymentStatus }, equal),
	columnOf("starts_at", "timestamptz", func(m *purchaseModel) time.Time { return m.StartsAt }, sameInstant),
	columnOf("ends_at", "timestamptz", func(m *purchaseModel) time.Time { return m.EndsAt }, sameInstant),
	columnOf("cancel_reason", "text", func(m *purchaseModel) *string { return m.CancelReason }, sameNullable),
	columnOf("updated_by_user_id", "uuid", func(m *purchaseModel) *string { return nullUUIDText(m.UpdatedByUserID) }, sameNullable),
	columnOf("updated_at", "timestamptz", func(m *purchaseModel) time.Time { return m.UpdatedAt }, sameInstant),
	columnOf("version", "bigint", func(m *purchaseModel) int64 { return m.Version }, equal),
}

// transitionWrite is the statement that writes ts and its parameters: one
// UPDATE for any number of rows, each guarded by the version it was loaded
// at (a row that moved on is not returned). It sets the transition columns
// that any of ts changes from the row it was loaded from — all of them for
// a transition without its loaded row — so an expiry writes the three it
// changes, not all eight; and always its event's id and moment (lastEvent).
func transitionWrite(ts []transition) (string, []any) {
	rows := make([]purchaseModel, len(ts))
	ids, prev := make([]string, len(ts)), make([]int64, len(ts))
	for i, t := range ts {
		rows[i], _ = toDBPurchase(t.purchase)
		ids[i], prev[i] = rows[i].ID.String(), t.previousVersion
	}
	var cols []transitionColumn
	for _, c := range transitionColumns {
		for i, t := range ts {
			if t.loaded == nil || !c.same(t.loaded, &rows[i]) {
				cols = append(cols, c)
				break
			}
		}
	}
	set := make([]string, len(cols))
	arrays := []string{"$1::uuid[]", "$2::bigint[]"}
	names := []string{"id", "previous_version"}
	args := []any{ids, prev}
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = v.%s", c.name, c.name)
		arrays = append(arrays, fmt.Sprintf("$%d::%s[]", i+3, c.sqlType))
		names = append(names, c.name)
		args = append(args, c.values(rows))
	}
	eventIDs, eventAts := make([]*string, len(ts)), make([]*time.Time, len(ts))
	for i, t := range ts {
		if t.event.id != uuid.Nil {
			id, at := t.event.id.String(), t.event.at
			eventIDs[i], eventAts[i] = &id, &at
		}
	}
	set = append(set, "last_event_id = v.last_event_id", "last_event_at = v.last_event_at")
	arrays = append(arrays, fmt.Sprintf("$%d::uuid[]", len(args)+1), fmt.Sprintf("$%d::timestamptz[]", len(args)+2))
	names = append(names, "last_event_id", "last_event_at")
	args = append(args, eventIDs, eventAts)
	return `UPDATE ` + purchasesTable + ` AS p
SET ` + strings.Join(set, ", ") + `
FROM unnest(` + strings.Join(arrays, ", ") + `) AS v(` + strings.Join(names, ", ") + `)
WHERE p.id = v.id AND p.version = v.previous_version
RETURNING p.id`, args
}

// writeTransitionSet runs transitionWrite for ts and splits them into the
// rows it updated (their indexes) and those it did not: their version had
// moved on, or so the guard says (ErrVersionConflict).
func writeTransitionSet(ctx context.Context, tx postgres.Tx, ts []transition) ([]int, []transition, error) {
	query, args := transitionWrite(ts)
	updated, err := queryIDs(ctx, tx, query, args)
	if err != nil {
		return nil, nil, fmt.Errorf("update purchases: %w", err)
	}
	written, unwritten := splitWritten(ts, updated)
	return written, unwritten, nil
}

// splitWritten tells the transitions written (updated holds their ids) from
// those the version guard filtered out.
func splitWritten(ts []transition, updated map[uuid.UUID]bool) (written []int, unwritten []transition) {
	for i, t := range ts {
		if updated[t.purchase.ID()] {
			written = append(written, i)
			continue
		}
		unwritten = append(unwritten, t)
	}
	return written, unwritten
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
