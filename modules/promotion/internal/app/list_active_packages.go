package app

import (
	"context"
	"fmt"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// ListActivePackagesHandler lists what a tenant can buy.
type ListActivePackagesHandler struct {
	packages PackageRepository
}

// Handle returns the active packages ordered by code.
func (h ListActivePackagesHandler) Handle(ctx context.Context) ([]*domain.Package, error) {
	pkgs, err := h.packages.ListActive(ctx)
	if err != nil {
		return nil, fmt.Errorf("list active packages: %w", err)
	}
	return pkgs, nil
}
