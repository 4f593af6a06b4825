package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// CancelPromotion is a request to cancel a purchase.
type CancelPromotion struct {
	Actor      Actor
	PurchaseID uuid.UUID
	Reason     string
}

// CancelPromotionHandler cancels purchases: Active or Pending -> Cancelled,
// with the Cancelled event in the same transaction.
type CancelPromotionHandler struct {
	purchases PurchaseRepository
	now       func() time.Time
}

// Handle cancels the purchase and returns it. A tenant may cancel only its
// own purchases (another tenant's is not found); an admin any. A purchase
// that is already Expired or Cancelled is a conflict. The row is locked
// while the transition is decided, so of two racing cancellations the
// second sees the first's result and gets the conflict.
func (h CancelPromotionHandler) Handle(ctx context.Context, cmd CancelPromotion) (*domain.Purchase, error) {
	var cancelled *domain.Purchase
	err := h.purchases.UpdatePurchase(ctx, cmd.PurchaseID, func(p *domain.Purchase) error {
		if !p.IsVisibleTo(cmd.Actor.TenantID, cmd.Actor.IsAdmin) {
			return domain.PurchaseNotFound(cmd.PurchaseID.String())
		}
		if err := p.Cancel(cmd.Reason, cmd.Actor.UserID, h.now()); err != nil {
			return err
		}
		cancelled = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cancel promotion %s: %w", cmd.PurchaseID, err)
	}
	return cancelled, nil
}
