package boost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/consumer"
)

// Projection is the consumer.Handler of the boost projection. Every event
// carries the purchase's whole state, so applying it replaces what the
// purchase contributes: nothing unless it is Active, and then its
// boostWeight to each target of a known kind. A snapshot (consumer.Origin)
// is applied exactly like a transition: the kit's version guard has let
// through only one above the version applied, which is what rebuilds an
// emptied projection; at or below it, it changes nothing.
type Projection struct {
	// Logger receives the warnings about unknown target kinds.
	Logger *slog.Logger
}

var _ consumer.Handler[contract.Envelope] = Projection{}

// Decode reads the record with the contract's rules (unknown enum values
// kept, another contract version warned about) and refuses, so that the kit
// dead-letters it, a record whose key, message_id header and envelope
// disagree, one outside the contract's bounds, and one of another event
// type (ADR 0016: kept for a replay, never dropped).
func (p Projection) Decode(r consumer.Record) (consumer.Event[contract.Envelope], error) {
	e, err := contract.DecodeRecord(contract.Record{Key: r.Key, Headers: r.Headers, Value: r.Value}, p.Logger)
	if err != nil {
		return consumer.Event[contract.Envelope]{}, err
	}
	return consumer.Event[contract.Envelope]{
		MessageID:   e.MessageID,
		AggregateID: e.AggregateID.String(),
		Version:     e.Payload.Version,
		OccurredAt:  e.OccurredAt,
		Body:        e,
	}, nil
}

// Apply replaces what each purchase of the batch contributes with what its
// last event in the batch describes, in three statements for the whole
// batch: an earlier event of a purchase in the same batch is superseded by
// its later one, since every event carries the whole state. All run in the
// kit's transaction; the version guard has already refused the stale
// events, snapshots included, so the origin plays no part here.
func (p Projection) Apply(ctx context.Context, tx *gorm.DB, events []consumer.Guarded[contract.Envelope]) error {
	last := make(map[uuid.UUID]contract.PurchaseChanged, len(events))
	var order, contributed []uuid.UUID // first-seen order; those that may have rows already
	for _, e := range events {
		payload := e.Body.Payload
		if _, seen := last[payload.PurchaseID]; !seen {
			order = append(order, payload.PurchaseID)
			// Before the purchase's first applied event it contributes nothing.
			if e.LastVersion > 0 {
				contributed = append(contributed, payload.PurchaseID)
			}
		}
		last[payload.PurchaseID] = payload
		for _, t := range payload.Targets {
			if !t.TargetKind.Known() {
				p.Logger.WarnContext(ctx, "target of an unknown kind ignored", "message_id", e.MessageID,
					"purchase_id", payload.PurchaseID, "target_kind", string(t.TargetKind), "target_id", t.TargetID)
			}
		}
	}
	if err := removeContributions(tx, contributed); err != nil {
		return err
	}
	var added []contribution
	for _, id := range order {
		payload := last[id]
		if payload.Status != contract.StatusActive {
			continue
		}
		for _, t := range payload.Targets {
			if t.TargetKind.Known() {
				added = append(added, contribution{id, t.TargetKind, t.TargetID, payload.BoostWeight})
			}
		}
	}
	return addContributions(tx, added)
}

// contribution is one row of boost.purchase_targets, as JSON for the
// statement that inserts a batch of them.
type contribution struct {
	PurchaseID  uuid.UUID           `json:"purchaseId"`
	TargetKind  contract.TargetKind `json:"targetKind"`
	TargetID    uuid.UUID           `json:"targetId"`
	BoostWeight int                 `json:"boostWeight"`
}

// addContributionsQuery is addContributions' statement: ? the rows as JSON.
const addContributionsQuery = `
		WITH added AS (
			INSERT INTO boost.purchase_targets (purchase_id, target_kind, target_id, boost_weight)
			SELECT t."purchaseId", t."targetKind", t."targetId", t."boostWeight"
			FROM jsonb_to_recordset(?::jsonb) AS t("purchaseId" uuid, "targetKind" text, "targetId" uuid, "boostWeight" integer)
			ON CONFLICT DO NOTHING
			RETURNING target_kind, target_id, boost_weight),
		per_target AS (
			SELECT target_kind, target_id, sum(boost_weight) AS weight, count(*) AS purchases
			FROM added GROUP BY target_kind, target_id)
		INSERT INTO boost.target_boosts AS b (target_kind, target_id, boost_weight, active_purchases, updated_at)
		SELECT target_kind, target_id, weight, purchases, clock_timestamp() FROM per_target
		ORDER BY target_kind, target_id
		ON CONFLICT (target_kind, target_id) DO UPDATE SET
			boost_weight = b.boost_weight + EXCLUDED.boost_weight,
			active_purchases = b.active_purchases + EXCLUDED.active_purchases,
			updated_at = clock_timestamp()`

// addContributions inserts the rows and adds them to their targets' boosts,
// summed per target: two purchases of one batch may boost the same target.
func addContributions(tx *gorm.DB, rows []contribution) error {
	if len(rows) == 0 {
		return nil
	}
	js, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("boost: add: %w", err)
	}
	err = tx.Exec(addContributionsQuery, string(js)).Error
	if err != nil {
		return fmt.Errorf("boost: add: %w", err)
	}
	return nil
}

// removeContributionsQuery is removeContributions' statement: ? the
// purchase ids as JSON; it returns the targets left without Active
// purchases.
const removeContributionsQuery = `
		WITH removed AS (
			DELETE FROM boost.purchase_targets
			WHERE purchase_id = ANY (ARRAY(SELECT value::uuid FROM jsonb_array_elements_text(?::jsonb)))
			RETURNING target_kind, target_id, boost_weight),
		per_target AS (
			SELECT target_kind, target_id, sum(boost_weight) AS weight, count(*) AS purchases
			FROM removed GROUP BY target_kind, target_id),
		updated AS (
			UPDATE boost.target_boosts b SET
				boost_weight = b.boost_weight - p.weight,
				active_purchases = b.active_purchases - p.purchases,
				updated_at = clock_timestamp()
			FROM per_target p
			WHERE b.target_kind = p.target_kind AND b.target_id = p.target_id
			RETURNING b.target_kind, b.target_id, b.active_purchases)
		SELECT target_kind, target_id FROM updated WHERE active_purchases = 0`

// deleteEmptiedQuery deletes the targets removeContributions emptied: ?
// their keys as JSON, each still at zero.
const deleteEmptiedQuery = `
		DELETE FROM boost.target_boosts b
		USING jsonb_to_recordset(?::jsonb) AS k("targetKind" text, "targetId" uuid)
		WHERE b.target_kind = k."targetKind" AND b.target_id = k."targetId" AND b.active_purchases = 0`

// removeContributions deletes the purchases' contributions and subtracts
// them from their targets, summed per target; a target left without Active
// purchases loses its row.
func removeContributions(tx *gorm.DB, purchases []uuid.UUID) error {
	if len(purchases) == 0 {
		return nil
	}
	ids, err := json.Marshal(purchases)
	if err != nil {
		return fmt.Errorf("boost: remove: %w", err)
	}
	// The update returns the rows it brought to zero; they stay locked until
	// commit, so the delete below finds them by key. No index may filter on
	// active_purchases: that would make every update non-HOT.
	var emptied []targetKey
	err = tx.Raw(removeContributionsQuery, string(ids)).Scan(&emptied).Error
	if err != nil {
		return fmt.Errorf("boost: remove: %w", err)
	}
	if len(emptied) == 0 {
		return nil
	}
	keys, err := json.Marshal(emptied)
	if err != nil {
		return fmt.Errorf("boost: remove: %w", err)
	}
	err = tx.Exec(deleteEmptiedQuery, string(keys)).Error
	if err != nil {
		return fmt.Errorf("boost: remove: %w", err)
	}
	return nil
}

// targetKey is the key of a row of boost.target_boosts, as the delete of
// emptied rows reads it back from JSON.
type targetKey struct {
	TargetKind string    `json:"targetKind" gorm:"column:target_kind"`
	TargetID   uuid.UUID `json:"targetId" gorm:"column:target_id"`
}
