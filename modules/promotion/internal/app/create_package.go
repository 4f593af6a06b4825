package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

// CreatePackage is an admin's request for a new package. Amount and
// CurrencyID are pointers so that a missing price is reported as missing
// rather than read as a free package.
type CreatePackage struct {
	Code         string
	Name         string
	Kind         string
	DurationDays int
	BoostWeight  int
	Amount       *decimal.Decimal
	CurrencyID   *int
	IsActive     *bool // nil: active
}

// CreatePackageHandler creates packages.
type CreatePackageHandler struct {
	packages PackageRepository
	now      func() time.Time
	newID    func() (uuid.UUID, error)
}

// Handle validates and stores the package; a taken code is a conflict.
func (h CreatePackageHandler) Handle(ctx context.Context, cmd CreatePackage) (*domain.Package, error) {
	var missing []apperror.FieldError
	spec := domain.PackageSpec{
		Code: cmd.Code, Name: cmd.Name, Kind: domain.PackageKind(cmd.Kind),
		DurationDays: cmd.DurationDays, BoostWeight: cmd.BoostWeight, IsActive: true,
	}
	if cmd.Amount != nil {
		spec.Amount = *cmd.Amount
	} else {
		missing = append(missing, apperror.FieldError{Field: "price.amount", Message: "is required"})
	}
	if cmd.CurrencyID != nil {
		spec.CurrencyID = *cmd.CurrencyID
	} else {
		missing = append(missing, apperror.FieldError{Field: "price.currencyId", Message: "is required"})
		spec.CurrencyID = domain.CurrencyIDRUB // reported above; keep the domain from repeating it
	}
	if cmd.IsActive != nil {
		spec.IsActive = *cmd.IsActive
	}
	id, err := h.newID()
	if err != nil {
		return nil, fmt.Errorf("create package: new id: %w", err)
	}
	pkg, err := domain.NewPackage(id, spec, h.now())
	if err = withFields(err, missing); err != nil {
		return nil, err
	}
	if err := h.packages.Create(ctx, pkg); err != nil {
		return nil, fmt.Errorf("create package %q: %w", cmd.Code, err)
	}
	return pkg, nil
}

// withFields adds fields to the validation error err (or makes one when err
// is nil), so that the client hears of every failed field at once.
func withFields(err error, fields []apperror.FieldError) error {
	if len(fields) == 0 {
		return err
	}
	if err == nil {
		return apperror.Invalid("invalid promotion package", fields...)
	}
	appErr, ok := apperror.As(err)
	if !ok || appErr.Kind != apperror.KindInvalid {
		return err
	}
	merged := *appErr
	merged.Fields = append(append([]apperror.FieldError(nil), fields...), appErr.Fields...)
	return &merged
}
