package adapters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// ExpireWriteChunk is the most transitions one statement of WriteAll writes: a
// batch of the largest size goes in ten statements, each well inside the
// batch's statement_timeout on a loaded machine, where one statement of
// 10 000 came near it (ADR 0014, decision 10).
const ExpireWriteChunk = 1000

// WriteAll implements expiry.ExpireTx by the transition's statement
// (sql/purchase_transition.sql), once per ExpireWriteChunk expiries: the
// transitions, their events and, when forgetPoison, the poison records of
// the rows written. A row its version guard filters out gets no event. The
// events are inserted in no particular order: they are of distinct
// purchases, and the relay keeps order only per key.
func (t *expireTx) WriteAll(ctx context.Context, es []expiry.Expiry, forgetPoison bool) ([]expiry.Expiry, error) {
	var unwritten []expiry.Expiry
	for chunk := range slices.Chunk(es, ExpireWriteChunk) {
		u, err := t.writeStatement(ctx, chunk, forgetPoison)
		if err != nil {
			return nil, err
		}
		unwritten = append(unwritten, u...)
	}
	return unwritten, nil
}

// writeStatement is one statement of WriteAll.
func (t *expireTx) writeStatement(ctx context.Context, es []expiry.Expiry, forgetPoison bool) ([]expiry.Expiry, error) {
	ts, events := make([]transition, len(es)), make([][]*message.Message, len(es))
	for i, ex := range es {
		ts[i], events[i] = t.transition(ex), t.events[ex.Purchase.ID()].msgs
	}
	ids, err := t.r.events.writeTransitions(ctx, t.tx, t.r.outbox, ts, events, forgetPoison)
	if err != nil {
		err = fmt.Errorf("write expired purchases: %w", err)
		if ownRefusal(err) || errors.Is(err, outbox.ErrMessageTooLarge) {
			return nil, &expiry.RowRefusal{Err: err}
		}
		return nil, err
	}
	updated := make(map[string]bool, len(ids))
	for _, id := range ids {
		updated[id] = true
	}
	var unwritten []expiry.Expiry
	for _, ex := range es {
		if !updated[ex.Purchase.ID().String()] {
			unwritten = append(unwritten, ex)
		}
	}
	return unwritten, nil
}

// ownRefusal reports whether err, raised by the transition's statement, may
// be one row's fault: a data-class error (postgres.FaultOf) that names the
// purchases table or none, raised outside outbox.publish. Any other
// table's (a trigger's write elsewhere) or the outbox's is the batch's.
func ownRefusal(err error) bool {
	r, _ := postgres.RefusalOf(err)
	var pgErr *pgconn.PgError
	inOutbox := errors.As(err, &pgErr) && strings.Contains(pgErr.Where, "outbox.publish(")
	return postgres.FaultOf(err) == postgres.FaultOfData && !inOutbox && (r.Table == "" || r.Table == purchasesTable)
}

// WriteOne implements expiry.ExpireTx: the transition's statement for ex
// alone, under a savepoint. Only a refusal of its purchase's row
// (ownRefusal), or of its event for its size, is the row's; the outbox
// refusing its event otherwise is no row's fault, whatever its class.
func (t *expireTx) WriteOne(ctx context.Context, ex expiry.Expiry) (bool, error) {
	var written bool
	var own error // the row's own refusal
	err := inItemSavepoint(ctx, t.tx, func() error {
		ids, err := t.r.events.writeTransitions(ctx, t.tx, t.r.outbox, []transition{t.transition(ex)},
			[][]*message.Message{t.events[ex.Purchase.ID()].msgs}, false)
		written = len(ids) == 1
		if ownRefusal(err) || errors.Is(err, outbox.ErrMessageTooLarge) {
			own = err
		}
		return err
	})
	switch {
	case err == nil:
		return written, nil
	case err == own:
		refusal, _ := postgres.RefusalOf(own)
		return false, &expiry.RowRefusal{Refusal: refusal.String(), Err: own}
	default:
		return false, err
	}
}

// ForgetPoison implements expiry.ExpireTx.
func (t *expireTx) ForgetPoison(ctx context.Context, ids []uuid.UUID) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM promotion.expire_poison WHERE purchase_id = ANY(@ids::uuid[])`,
		pgx.NamedArgs{"ids": uuidStrings(ids)}); err != nil {
		return fmt.Errorf("forget expired poison purchases: %w", err)
	}
	return nil
}

// Reread implements expiry.ExpireTx.
func (t *expireTx) Reread(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]expiry.SupersededExpiry, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id, status, version FROM promotion.promotion_purchases WHERE id = ANY(@ids::uuid[])`,
		pgx.NamedArgs{"ids": uuidStrings(ids)})
	if err != nil {
		return nil, fmt.Errorf("re-read unwritten purchases: %w", err)
	}
	defer func() { _ = rows.Close() }()
	current := make(map[uuid.UUID]expiry.SupersededExpiry, len(ids))
	for rows.Next() {
		var s expiry.SupersededExpiry
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

// inItemSavepoint runs fn after SAVEPOINT expire_item; on fn's error it
// rolls back to the savepoint (the transaction stays usable) and returns
// fn's error, or the rollback's error when even that fails.
func inItemSavepoint(ctx context.Context, tx postgres.Tx, fn func() error) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT expire_item`); err != nil {
		return fmt.Errorf("savepoint expire_item: %w", err)
	}
	if err := fn(); err != nil {
		if _, rbErr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT expire_item`); rbErr != nil {
			// Only rbErr is wrapped: the transaction is broken, whatever
			// fn's error was, so this must not pass for a row error.
			return fmt.Errorf("rollback to savepoint expire_item: %w (after: %v)", rbErr, err)
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT expire_item`); err != nil {
		return fmt.Errorf("release savepoint expire_item: %w", err)
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
