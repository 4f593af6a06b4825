package adapters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// expireWriteForget is the module's CTE after the transition in the
// expiry's one write (sql/expire_write.sql).
//
//go:embed sql/expire_write.sql
var expireWriteForget string

// expireWriteHead is the module's half of the expiry's one write: the
// transition as the CTE updated, then expireWriteForget. Both are literals;
// this joins them once, and outbox.NewChange adds its own half.
var expireWriteHead = "WITH updated AS (\n" + transitionQuery + "\n),\n" + expireWriteForget

// WriteAll implements app.ExpireTx by one statement, expireWrite: the
// transition (sql/purchase_transition.sql) and the poison DELETE
// (sql/expire_write.sql), with platform/outbox's inserts over the rows it
// updated. A row its version guard filters out gets no event. The events
// are inserted in no particular order: they are of distinct purchases, and
// the relay keeps order only per key.
func (t *expireTx) WriteAll(ctx context.Context, es []app.Expiry, forgetPoison bool) ([]app.Expiry, error) {
	if len(es) == 0 {
		return nil, nil
	}
	ts, events, keys := make([]transition, len(es)), make([][]*message.Message, len(es)), make([]string, len(es))
	for i, ex := range es {
		ts[i], events[i], keys[i] = t.transition(ex), t.events[ex.Purchase.ID()].msgs, ex.Purchase.ID().String()
	}
	args := transitionArgs(ts)
	args["forget_poison"] = forgetPoison
	ids, err := t.r.outbox.Write(ctx, t.tx, outbox.Write{Events: t.r.events.outboxEvents(events...), Change: t.r.write, Args: args, Keys: keys})
	if err != nil {
		err = fmt.Errorf("write expired purchases: %w", err)
		if ownRefusal(err) || errors.Is(err, outbox.ErrMessageTooLarge) {
			return nil, &app.RowRefusal{Err: err}
		}
		return nil, err
	}
	updated := make(map[string]bool, len(ids))
	for _, id := range ids {
		updated[id] = true
	}
	var unwritten []app.Expiry
	for _, ex := range es {
		if !updated[ex.Purchase.ID().String()] {
			unwritten = append(unwritten, ex)
		}
	}
	return unwritten, nil
}

// ownRefusal reports whether err, raised by a statement that writes rows of
// the purchases table, may be one row's fault: a data-class error
// (postgres.FaultOf) that names that table or none. Any other table's (the
// outbox's insert, a trigger's write elsewhere) is the batch's.
func ownRefusal(err error) bool {
	r, _ := postgres.RefusalOf(err)
	return postgres.FaultOf(err) == postgres.FaultOfData && (r.Table == "" || r.Table == purchasesTable)
}

// WriteOne implements app.ExpireTx: the transition's own statement, then
// its events, under a savepoint. Only the transition's statement refused
// for its data (ownRefusal), or its event for its size, is the row's; the
// outbox's insert refusing it is no row's fault, whatever its class.
func (t *expireTx) WriteOne(ctx context.Context, ex app.Expiry) (bool, error) {
	var written bool
	var own error // the row's own refusal
	err := inSavepoint(ctx, t.tx, "expire_item", func() error {
		var err error
		if written, err = writeTransition(ctx, t.tx, t.transition(ex)); err != nil || !written {
			if ownRefusal(err) {
				own = err
			}
			return err
		}
		err = t.r.events.write(ctx, t.tx, t.r.outbox, t.events[ex.Purchase.ID()].msgs)
		if errors.Is(err, outbox.ErrMessageTooLarge) {
			own = err
		}
		return err
	})
	switch {
	case err == nil:
		return written, nil
	case err == own:
		refusal, _ := postgres.RefusalOf(own)
		return false, &app.RowRefusal{Refusal: refusal.String(), Err: own}
	default:
		return false, err
	}
}

// ForgetPoison implements app.ExpireTx.
func (t *expireTx) ForgetPoison(ctx context.Context, ids []uuid.UUID) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM promotion.expire_poison WHERE purchase_id = ANY(@ids::uuid[])`,
		pgx.NamedArgs{"ids": uuidStrings(ids)}); err != nil {
		return fmt.Errorf("forget expired poison purchases: %w", err)
	}
	return nil
}

// Reread implements app.ExpireTx.
func (t *expireTx) Reread(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]app.SupersededExpiry, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id, status, version FROM promotion.promotion_purchases WHERE id = ANY(@ids::uuid[])`,
		pgx.NamedArgs{"ids": uuidStrings(ids)})
	if err != nil {
		return nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	defer func() { _ = rows.Close() }()
	current := make(map[uuid.UUID]app.SupersededExpiry, len(ids))
	for rows.Next() {
		var s app.SupersededExpiry
		if err := rows.Scan(&s.PurchaseID, &s.Status, &s.Version); err != nil {
			return nil, fmt.Errorf("re-read unwritten purchases: %w", err)
		}
		current[s.PurchaseID] = s
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	return current, nil
}

// inSavepoint runs fn after SAVEPOINT name; on fn's error it rolls back to
// the savepoint (the transaction stays usable) and returns fn's error, or
// the rollback's error when even that fails.
func inSavepoint(ctx context.Context, tx postgres.Tx, name string, fn func() error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("savepoint %s: %w", name, err)
	}
	if err := fn(); err != nil {
		if _, rbErr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); rbErr != nil {
			// Only rbErr is wrapped: the transaction is broken, whatever
			// fn's error was, so this must not pass for a row error.
			return fmt.Errorf("rollback to savepoint %s: %w (after: %v)", name, rbErr, err)
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint %s: %w", name, err)
	}
	return nil
}

// uuidStrings turns ids into the text form a uuid[] parameter accepts.
func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
