package adapters

import (
	"context"
	_ "embed"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/outbox"
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
	name   string
	values func(rows []purchaseModel) any
	same   func(a, b *purchaseModel) bool
}

// columnOf describes a column whose values value reads from a row; T must
// be a type pgx encodes as an element of the column's array in
// sql/purchase_transition.sql.
func columnOf[T any](name string, value func(*purchaseModel) T, same func(a, b T) bool) transitionColumn {
	return transitionColumn{name: name,
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

// transitionColumns is every column a transition may change, as
// sql/purchase_transition.sql sets them. The rest of a purchase is fixed at
// creation; TestTransitionsChangeOnlyWrittenColumns fails when a domain
// transition starts to change a column missing here.
var transitionColumns = []transitionColumn{
	columnOf("status", func(m *purchaseModel) string { return m.Status }, equal),
	columnOf("payment_status", func(m *purchaseModel) string { return m.PaymentStatus }, equal),
	columnOf("starts_at", func(m *purchaseModel) time.Time { return m.StartsAt }, sameInstant),
	columnOf("ends_at", func(m *purchaseModel) time.Time { return m.EndsAt }, sameInstant),
	columnOf("cancel_reason", func(m *purchaseModel) *string { return m.CancelReason }, sameNullable),
	columnOf("updated_by_user_id", func(m *purchaseModel) *string { return nullUUIDText(m.UpdatedByUserID) }, sameNullable),
	columnOf("updated_at", func(m *purchaseModel) time.Time { return m.UpdatedAt }, sameInstant),
	columnOf("version", func(m *purchaseModel) int64 { return m.Version }, equal),
}

// transitionQuery writes transitions and their events
// (sql/purchase_transition.sql).
//
//go:embed sql/purchase_transition.sql
var transitionQuery string

// transitionArgs are transitionQuery's parameters for ts. A column is set
// when any of ts changes it from the row it was loaded from, every column
// for a transition without its loaded row: an expiry sends the three it
// changes, not all eight. Every row's event id and moment (lastEvent) are
// sent.
func transitionArgs(ts []transition) pgx.NamedArgs {
	rows := make([]purchaseModel, len(ts))
	ids, prev := make([]string, len(ts)), make([]int64, len(ts))
	eventIDs, eventAts := make([]*string, len(ts)), make([]*time.Time, len(ts))
	for i, t := range ts {
		rows[i], _ = toDBPurchase(t.purchase)
		ids[i], prev[i] = rows[i].ID.String(), t.previousVersion
		if t.event.id != uuid.Nil {
			id, at := t.event.id.String(), t.event.at
			eventIDs[i], eventAts[i] = &id, &at
		}
	}
	args := pgx.NamedArgs{"id": ids, "previous_version": prev, "last_event_id": eventIDs, "last_event_at": eventAts}
	for _, c := range transitionColumns {
		set := false
		for i, t := range ts {
			if t.loaded == nil || !c.same(t.loaded, &rows[i]) {
				set = true
				break
			}
		}
		args["set_"+c.name], args[c.name] = set, nil
		if set {
			args[c.name] = c.values(rows)
		}
	}
	return args
}

// writeTransitions runs transitionQuery for ts with their events (each
// transition's, index-aligned) on every publication, forgetting the poison
// records of the rows it writes when forgetPoison. It returns the ids of
// the rows written: a row its version guard filtered out (its version had
// moved on) is not among them and got no event.
func (ps Publications) writeTransitions(ctx context.Context, tx postgres.Tx, out *outbox.Publisher, ts []transition,
	events [][]*message.Message, forgetPoison bool) ([]string, error) {
	args := transitionArgs(ts)
	args["forget_poison"] = forgetPoison
	keys := make([]string, len(ts))
	for i, t := range ts {
		keys[i] = t.purchase.ID().String()
	}
	return ps.writeWith(ctx, tx, out, transitionQuery, args, keys, events...)
}

// nullUUIDText is the text form of a nullable uuid, nil for NULL.
func nullUUIDText(id uuid.NullUUID) *string {
	if !id.Valid {
		return nil
	}
	s := id.UUID.String()
	return &s
}
