package adapters

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// writeSet writes the candidates' transitions, their events and forgets the
// expired ones' poison records (when forgetPoison) in one statement,
// expireWrite: the transition (sql/purchase_transition.sql) and the poison
// DELETE (sql/expire_write.sql), with platform/outbox's inserts over the
// rows it updated. A row its version guard filters out gets no event and
// is returned unwritten. The events are inserted in no particular order:
// they are of distinct purchases, and the relay keeps order only per key.
func (r *ExpireRepository) writeSet(ctx context.Context, tx postgres.Tx, cs []expiryCandidate, forgetPoison bool) ([]expiryCandidate, []transition, error) {
	if len(cs) == 0 {
		return nil, nil, nil
	}
	ts, events, keys := make([]transition, len(cs)), make([][]*message.Message, len(cs)), make([]string, len(cs))
	for i, c := range cs {
		ts[i], events[i], keys[i] = c.transition, c.events, c.purchase.ID().String()
	}
	args := transitionArgs(ts)
	args["forget_poison"] = forgetPoison
	ids, err := r.outbox.Write(ctx, tx, outbox.Write{Events: r.events.outboxEvents(events...), Change: r.write, Args: args, Keys: keys})
	if err != nil {
		return nil, nil, fmt.Errorf("write expired purchases: %w", err)
	}
	updated := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		updated[uuid.MustParse(id)] = true
	}
	idx, unwritten := splitWritten(ts, updated)
	written := make([]expiryCandidate, len(idx))
	for i, j := range idx {
		written[i] = cs[j]
	}
	return written, unwritten, nil
}

// expireWriteForget is the module's CTE after the transition in the
// expiry's one write (sql/expire_write.sql).
//
//go:embed sql/expire_write.sql
var expireWriteForget string

// expireWriteHead is the module's half of the expiry's one write: the
// transition as the CTE updated, then expireWriteForget. Both are literals;
// this joins them once, and outbox.NewChange adds its own half.
var expireWriteHead = "WITH updated AS (\n" + transitionQuery + "\n),\n" + expireWriteForget

// writeRowByRow writes each candidate's transition and events under its own
// savepoint, so a row whose own statement, its transition's, is refused for
// its data (ownRefusal) is set aside and the others are kept, then forgets
// the poison records of those written. Any other error aborts the batch,
// whatever its class when the outbox's insert raised it: the platform's
// table refusing an event is no row's fault.
func (r *ExpireRepository) writeRowByRow(ctx context.Context, tx postgres.Tx, cs []expiryCandidate) (written []expiryCandidate, unwritten []transition, failed []app.FailedExpiry, err error) {
	for _, c := range cs {
		var stale []transition
		var own error // the transition's own statement's error
		rowErr := inSavepoint(ctx, tx, "expire_item", func() error {
			if _, stale, own = writeTransitionSet(ctx, tx, []transition{c.transition}); own != nil || len(stale) > 0 {
				return own
			}
			return r.events.write(ctx, tx, r.outbox, c.events)
		})
		switch {
		case rowErr == nil && len(stale) > 0:
			unwritten = append(unwritten, stale...)
		case rowErr == nil:
			written = append(written, c)
		case rowErr == own && ownRefusal(own):
			refusal, _ := postgres.RefusalOf(own)
			failed = append(failed, app.FailedExpiry{PurchaseID: c.purchase.ID(), Err: rowErr, Refusal: refusal.String()})
		default:
			return nil, nil, nil, rowErr
		}
	}
	if len(written) == 0 {
		return nil, unwritten, failed, nil
	}
	ids := make([]uuid.UUID, len(written))
	for i, c := range written {
		ids[i] = c.purchase.ID()
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+expirePoisonTable+` WHERE purchase_id = ANY($1::uuid[])`,
		uuidStrings(ids)); err != nil {
		return nil, nil, nil, fmt.Errorf("forget expired poison purchases: %w", err)
	}
	return written, unwritten, failed, nil
}

// rereadUnwritten re-reads the rows the version guard filtered out. A row
// whose version moved on (or that is gone) lost a race to another writer:
// it is superseded, not poison, and the next selection sees its new state.
// A row still at the version it was loaded at was not written for a reason
// of its own (a trigger or rule skipped it) and is poison.
func rereadUnwritten(ctx context.Context, tx postgres.Tx, ts []transition) ([]app.SupersededExpiry, []app.FailedExpiry, error) {
	if len(ts) == 0 {
		return nil, nil, nil
	}
	ids := make([]uuid.UUID, len(ts))
	for i, t := range ts {
		ids[i] = t.purchase.ID()
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, status, version FROM `+purchasesTable+` WHERE id = ANY($1::uuid[])`, uuidStrings(ids))
	if err != nil {
		return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	defer rows.Close()
	current := make(map[uuid.UUID]app.SupersededExpiry, len(ts))
	for rows.Next() {
		var s app.SupersededExpiry
		if err := rows.Scan(&s.PurchaseID, &s.Status, &s.Version); err != nil {
			return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
		}
		current[s.PurchaseID] = s
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	var superseded []app.SupersededExpiry
	var refused []app.FailedExpiry
	for _, t := range ts {
		now, found := current[t.purchase.ID()]
		if found && now.Version == t.previousVersion {
			refused = append(refused, app.FailedExpiry{PurchaseID: t.purchase.ID(),
				Err: fmt.Errorf("purchase %s at version %d was not updated: a trigger or rule skipped its row", t.purchase.ID(), t.previousVersion)})
			continue
		}
		now.PurchaseID = t.purchase.ID()
		superseded = append(superseded, now)
	}
	return superseded, refused, nil
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
