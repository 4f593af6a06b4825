package app

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// GetPurchase asks for one purchase.
type GetPurchase struct {
	Actor      Actor
	PurchaseID uuid.UUID
}

// GetPurchaseHandler reads one purchase.
type GetPurchaseHandler struct {
	purchases PurchaseRepository
}

// Handle returns the purchase when the actor may see it; another tenant's
// purchase is reported as not found, so its existence is not revealed.
func (h GetPurchaseHandler) Handle(ctx context.Context, q GetPurchase) (*domain.Purchase, error) {
	p, err := h.purchases.Get(ctx, q.PurchaseID)
	if err != nil {
		return nil, fmt.Errorf("get purchase: %w", err)
	}
	if !p.IsVisibleTo(q.Actor.TenantID, q.Actor.IsAdmin) {
		return nil, domain.PurchaseNotFound(q.PurchaseID.String())
	}
	return p, nil
}
