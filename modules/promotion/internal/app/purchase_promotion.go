package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

// IdempotencyKeyField names the Idempotency-Key header in validation errors.
const IdempotencyKeyField = "Idempotency-Key"

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// PurchasePromotion is a tenant's request to buy a package for targets.
type PurchasePromotion struct {
	Actor     Actor
	PackageID uuid.UUID
	Targets   []domain.TargetRef
	// IdempotencyKey is optional; "" means none.
	IdempotencyKey string
}

// PurchaseResult is the purchase a PurchasePromotion led to. Created is
// false when an earlier request with the same Idempotency-Key made it.
type PurchaseResult struct {
	Purchase *domain.Purchase
	Created  bool
}

// PurchasePromotionHandler buys a promotion in no-payment mode: the purchase
// is created and activated in one transaction together with its Active
// event.
type PurchasePromotionHandler struct {
	purchases PurchaseRepository
	now       func() time.Time
	newID     func() (uuid.UUID, error)
}

// Handle validates and performs the purchase. With an Idempotency-Key, a
// repeat of the same request returns the first purchase (Created false),
// also when the repeats race, and a repeat with another body is a
// validation error on the key.
func (h PurchasePromotionHandler) Handle(ctx context.Context, cmd PurchasePromotion) (PurchaseResult, error) {
	if err := validateIdempotencyKey(cmd.IdempotencyKey); err != nil {
		return PurchaseResult{}, err
	}
	hash := cmd.requestHash()
	if cmd.IdempotencyKey != "" {
		// The common repeat (a client retrying after a lost response) is
		// answered here without building anything.
		rec, err := h.purchases.FindIdempotencyKey(ctx, cmd.Actor.TenantID, cmd.IdempotencyKey)
		if err != nil {
			return PurchaseResult{}, fmt.Errorf("purchase promotion: %w", err)
		}
		if rec != nil {
			return h.replay(ctx, rec, hash)
		}
	}

	id, err := h.newID()
	if err != nil {
		return PurchaseResult{}, fmt.Errorf("purchase promotion: new id: %w", err)
	}
	now := h.now()
	var claim *IdempotencyRecord
	if cmd.IdempotencyKey != "" {
		claim = &IdempotencyRecord{
			TenantID: cmd.Actor.TenantID, Key: cmd.IdempotencyKey, RequestHash: hash, PurchaseID: id, CreatedAt: now,
		}
	}
	purchase, err := h.purchases.Add(ctx, cmd.PackageID, claim, func(pkg *domain.Package) (*domain.Purchase, error) {
		return domain.NewPurchase(domain.NewPurchaseParams{
			ID: id, TenantID: cmd.Actor.TenantID, CreatedBy: cmd.Actor.UserID,
			PackageID: cmd.PackageID, Package: pkg, Targets: cmd.Targets, Now: now,
		})
	})
	if errors.Is(err, ErrIdempotencyKeyTaken) {
		// A concurrent request with the same key won; Add waited for it to
		// commit, so its record is visible now.
		rec, ferr := h.purchases.FindIdempotencyKey(ctx, cmd.Actor.TenantID, cmd.IdempotencyKey)
		if ferr != nil {
			return PurchaseResult{}, fmt.Errorf("purchase promotion: re-read idempotency key: %w", ferr)
		}
		if rec == nil {
			return PurchaseResult{}, errors.New("purchase promotion: idempotency key claimed but not found")
		}
		return h.replay(ctx, rec, hash)
	}
	if err != nil {
		return PurchaseResult{}, fmt.Errorf("purchase promotion: %w", err)
	}
	return PurchaseResult{Purchase: purchase, Created: true}, nil
}

// replay answers a repeated Idempotency-Key with the purchase it created.
func (h PurchasePromotionHandler) replay(ctx context.Context, rec *IdempotencyRecord, hash string) (PurchaseResult, error) {
	if rec.RequestHash != hash {
		return PurchaseResult{}, apperror.Invalid("The Idempotency-Key was already used with another request.",
			apperror.FieldError{Field: IdempotencyKeyField, Message: "was already used with a different request body"})
	}
	purchase, err := h.purchases.Get(ctx, rec.PurchaseID)
	if err != nil {
		return PurchaseResult{}, fmt.Errorf("purchase promotion: replay %s: %w", rec.PurchaseID, err)
	}
	return PurchaseResult{Purchase: purchase, Created: false}, nil
}

// requestHash identifies the request's meaning, not its bytes: the same
// package and targets in the same order hash the same however the JSON was
// spaced or its UUIDs cased.
func (cmd PurchasePromotion) requestHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "package=%s\n", cmd.PackageID)
	for _, t := range cmd.Targets {
		fmt.Fprintf(h, "target=%s:%s\n", t.Kind, t.ID)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validateIdempotencyKey accepts 1..255 visible ASCII characters, which is
// what clients put in headers (UUIDs, ULIDs, random tokens).
func validateIdempotencyKey(key string) error {
	if key == "" {
		return nil
	}
	bad := len(key) > MaxIdempotencyKeyLen
	for i := 0; i < len(key) && !bad; i++ {
		bad = key[i] < 0x21 || key[i] > 0x7e
	}
	if bad {
		return apperror.Invalid("The Idempotency-Key is not acceptable.", apperror.FieldError{
			Field:   IdempotencyKeyField,
			Message: fmt.Sprintf("must be 1 to %d visible ASCII characters", MaxIdempotencyKeyLen),
		})
	}
	return nil
}
