// Package app holds the promotion module's use cases, one file each: what a
// caller may ask for, the rules of asking, and the order of the steps. It
// talks to storage only through the repository interfaces below, which the
// adapters package implements; it knows nothing of HTTP, SQL or Kafka, nor
// of Prometheus or OpenTelemetry: a use case that reports declares an
// observer (SnapshotObserver). The expiry job has a package of its own,
// internal/expiry.
package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// Actor is who performs a use case: a user acting for a tenant, or a
// platform admin (who may act on any tenant's purchases).
type Actor struct {
	UserID   uuid.UUID
	TenantID uuid.UUID // uuid.Nil for an admin without a tenant
	IsAdmin  bool
}

// PurchaseRepository stores purchases. Each write is one transaction that
// also puts the purchase's event into the outbox, so a status change and its
// event are never separated.
type PurchaseRepository interface {
	// Add stores a new purchase and its event in one transaction. When claim
	// is not nil it claims the idempotency key in that transaction, and
	// fails with ErrIdempotencyKeyTaken (storing nothing) when another
	// request holds it; a racing request waits until the holder commits or
	// rolls back. It stores what build makes of the package (nil when there
	// is none), which it holds with a share lock until the commit: a change
	// of the package, such as a deactivation, is ordered entirely before or
	// after the purchase. build may run up to three times (again on the
	// package as read when the one it was given changed), so it must be
	// pure. An error from build stores nothing and is returned as is.
	Add(ctx context.Context, packageID uuid.UUID, claim *IdempotencyRecord, build func(*domain.Package) (*domain.Purchase, error)) (*domain.Purchase, error)
	// FindIdempotencyKey returns the record of a claimed key, or nil.
	FindIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (*IdempotencyRecord, error)
	// Get returns a purchase, or an error wrapping domain.ErrPurchaseNotFound.
	Get(ctx context.Context, id uuid.UUID) (*domain.Purchase, error)
	// List returns up to q.Limit purchases of q.TenantID, newest first
	// (created_at desc, id desc), after q.After when set.
	List(ctx context.Context, q PurchaseListQuery) ([]*domain.Purchase, error)
	// UpdatePurchase loads the purchase with its row locked, lets update
	// change it and, when update raised its version, stores it with a version
	// check and puts its event into the outbox, all in one transaction. An
	// error from update rolls everything back and is returned as is.
	UpdatePurchase(ctx context.Context, id uuid.UUID, update func(*domain.Purchase) error) error
	// DeleteIdempotencyKeysBefore deletes up to limit idempotency keys
	// created before cutoff and returns how many it deleted.
	DeleteIdempotencyKeysBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// PackageRepository stores promotion packages.
type PackageRepository interface {
	// Get returns a package, or an error wrapping domain.ErrPackageNotFound.
	Get(ctx context.Context, id uuid.UUID) (*domain.Package, error)
	// Create stores a new package; a taken code is a conflict error.
	Create(ctx context.Context, p *domain.Package) error
	// CreateIfCodeAbsent stores p unless a package with its code exists, and
	// reports whether it did.
	CreateIfCodeAbsent(ctx context.Context, p *domain.Package) (bool, error)
	// UpdatePackage loads the package with its row locked, lets update change
	// it and stores it, in one transaction. A taken code is a conflict error.
	UpdatePackage(ctx context.Context, id uuid.UUID, update func(*domain.Package) error) error
	// ListActive returns the packages that can be bought, ordered by code.
	ListActive(ctx context.Context) ([]*domain.Package, error)
}

// ErrIdempotencyKeyTaken is returned by PurchaseRepository.Add when another
// request has claimed the same tenant's Idempotency-Key.
var ErrIdempotencyKeyTaken = errors.New("idempotency key already claimed")

// IdempotencyRecord ties a tenant's Idempotency-Key to the purchase the
// first request with it created, and to a hash of that request's body.
type IdempotencyRecord struct {
	TenantID    uuid.UUID
	Key         string
	RequestHash string
	PurchaseID  uuid.UUID
	CreatedAt   time.Time
}

// Config wires the use cases.
type Config struct {
	Purchases PurchaseRepository
	Packages  PackageRepository
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// NewID makes ids for new aggregates; UUIDv7 when nil (time-ordered ids
	// keep the primary key index compact).
	NewID func() (uuid.UUID, error)
}

// Application bundles the module's use cases.
type Application struct {
	// Commands: they change state, each in one transaction.
	PurchasePromotion PurchasePromotionHandler
	CancelPromotion   CancelPromotionHandler
	CreatePackage     CreatePackageHandler
	UpdatePackage     UpdatePackageHandler
	SeedDemoPackages  SeedDemoPackagesHandler
	// Queries: they only read.
	GetPurchase        GetPurchaseHandler
	ListPurchases      ListPurchasesHandler
	ListActivePackages ListActivePackagesHandler
}

// New builds the use cases.
func New(cfg Config) (Application, error) {
	if cfg.Purchases == nil || cfg.Packages == nil {
		return Application{}, errors.New("app: purchase and package repositories are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewV7
	}
	return Application{
		PurchasePromotion:  PurchasePromotionHandler{purchases: cfg.Purchases, now: cfg.Now, newID: cfg.NewID},
		CancelPromotion:    CancelPromotionHandler{purchases: cfg.Purchases, now: cfg.Now},
		GetPurchase:        GetPurchaseHandler{purchases: cfg.Purchases},
		ListPurchases:      ListPurchasesHandler{purchases: cfg.Purchases},
		CreatePackage:      CreatePackageHandler{packages: cfg.Packages, now: cfg.Now, newID: cfg.NewID},
		UpdatePackage:      UpdatePackageHandler{packages: cfg.Packages, now: cfg.Now},
		ListActivePackages: ListActivePackagesHandler{packages: cfg.Packages},
		SeedDemoPackages:   SeedDemoPackagesHandler{packages: cfg.Packages, now: cfg.Now, newID: cfg.NewID},
	}, nil
}
