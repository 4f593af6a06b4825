package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// UpdatePackage is an admin's partial update of a package: nil fields stay.
type UpdatePackage struct {
	PackageID uuid.UUID
	Changes   domain.PackageChanges
}

// UpdatePackageHandler changes packages. It never touches purchases: they
// keep the snapshots taken when they were made (INV-2).
type UpdatePackageHandler struct {
	packages PackageRepository
	now      func() time.Time
}

// Handle applies the changes and returns the package. An empty change set
// returns the package as it is, without stamping updatedAt.
func (h UpdatePackageHandler) Handle(ctx context.Context, cmd UpdatePackage) (*domain.Package, error) {
	var updated *domain.Package
	err := h.packages.UpdatePackage(ctx, cmd.PackageID, func(p *domain.Package) error {
		updated = p
		if cmd.Changes.IsEmpty() {
			return nil
		}
		return p.Update(cmd.Changes, h.now())
	})
	if err != nil {
		return nil, fmt.Errorf("update package %s: %w", cmd.PackageID, err)
	}
	return updated, nil
}
