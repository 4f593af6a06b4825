package boost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/consumer"
)

// Projection is the consumer.Handler of the boost projection. An event is a
// snapshot of the purchase, so applying it replaces what the purchase
// contributes: nothing unless it is Active, and then its boostWeight to each
// target of a known kind.
type Projection struct {
	// Logger receives the warnings about unknown target kinds.
	Logger *slog.Logger
}

var _ consumer.Handler[contract.Envelope] = Projection{}

// Decode reads the record with the contract's rules (unknown enum values
// kept, another contract version warned about) and refuses a record whose
// key, message_id header and envelope disagree.
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

// Apply takes away what the purchase contributed so far and, when it is
// Active, adds its weight to each target. Both run in the kit's transaction;
// the version guard has already refused a version not above lastVersion.
func (p Projection) Apply(ctx context.Context, tx *gorm.DB, ev consumer.Event[contract.Envelope], lastVersion int64) error {
	payload := ev.Body.Payload
	// Before the purchase's first applied event it contributes nothing.
	if lastVersion > 0 {
		if err := removeContributions(tx, payload); err != nil {
			return err
		}
	}
	if payload.Status != contract.StatusActive {
		return nil
	}
	var known []contract.Target
	for _, t := range payload.Targets {
		if !t.TargetKind.Known() {
			p.Logger.WarnContext(ctx, "target of an unknown kind ignored", "message_id", ev.MessageID,
				"purchase_id", payload.PurchaseID, "target_kind", string(t.TargetKind), "target_id", t.TargetID)
			continue
		}
		known = append(known, t)
	}
	if len(known) == 0 {
		return nil
	}
	targets, err := json.Marshal(known)
	if err != nil {
		return fmt.Errorf("boost: add %s: %w", payload.PurchaseID, err)
	}
	err = tx.Exec(`
		WITH added AS (
			INSERT INTO boost.purchase_targets (purchase_id, target_kind, target_id, boost_weight)
			SELECT ?, t."targetKind", t."targetId", ?
			FROM jsonb_to_recordset(?::jsonb) AS t("targetKind" text, "targetId" uuid)
			ON CONFLICT DO NOTHING
			RETURNING target_kind, target_id, boost_weight)
		INSERT INTO boost.target_boosts AS b (target_kind, target_id, boost_weight, active_purchases, updated_at)
		SELECT target_kind, target_id, boost_weight, 1, clock_timestamp() FROM added
		ON CONFLICT (target_kind, target_id) DO UPDATE SET
			boost_weight = b.boost_weight + EXCLUDED.boost_weight,
			active_purchases = b.active_purchases + 1,
			updated_at = clock_timestamp()`,
		payload.PurchaseID, payload.BoostWeight, string(targets)).Error
	if err != nil {
		return fmt.Errorf("boost: add %s: %w", payload.PurchaseID, err)
	}
	return nil
}

// removeContributions deletes the purchase's contributions and subtracts
// them from their targets; a target left without Active purchases loses its
// row.
func removeContributions(tx *gorm.DB, payload contract.PurchaseChanged) error {
	err := tx.Exec(`
		WITH removed AS (
			DELETE FROM boost.purchase_targets WHERE purchase_id = ?
			RETURNING target_kind, target_id, boost_weight)
		UPDATE boost.target_boosts b SET
			boost_weight = b.boost_weight - r.boost_weight,
			active_purchases = b.active_purchases - 1,
			updated_at = clock_timestamp()
		FROM removed r
		WHERE b.target_kind = r.target_kind AND b.target_id = r.target_id`, payload.PurchaseID).Error
	if err != nil {
		return fmt.Errorf("boost: remove %s: %w", payload.PurchaseID, err)
	}
	// Only rows just brought to zero match; the partial index finds them.
	if err := tx.Exec(`DELETE FROM boost.target_boosts WHERE active_purchases = 0`).Error; err != nil {
		return fmt.Errorf("boost: remove %s: %w", payload.PurchaseID, err)
	}
	return nil
}
