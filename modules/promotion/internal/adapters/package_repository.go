package adapters

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/postgres"
)

// packageCodeConstraint is the unique constraint on package codes
// (migrations/00002_promotion.sql); its violation is the 409 of a taken code.
const packageCodeConstraint = "promotion_packages_code_key"

// packageColumns are the columns a package update writes: all but id and
// created_at.
var packageColumns = []string{
	"code", "name", "kind", "duration_days", "boost_weight", "price_amount", "currency_id", "is_active", "updated_at",
}

// PackageRepository stores promotion packages.
type PackageRepository struct {
	db *gorm.DB
}

var _ app.PackageRepository = (*PackageRepository)(nil)

// NewPackageRepository returns the repository.
func NewPackageRepository(db *gorm.DB) (*PackageRepository, error) {
	if db == nil {
		return nil, errors.New("adapters: package repository needs a database")
	}
	return &PackageRepository{db: db}, nil
}

// selectPackages reads packages joined with their currency, whose display
// snapshot a price carries.
func selectPackages(db *gorm.DB) *gorm.DB {
	return db.Table(packagesTable + " AS p").
		Joins("JOIN " + currenciesTable + " AS c ON c.id = p.currency_id").
		Select("p.*, c.iso_code AS currency_iso_code, c.name AS currency_name, c.sign AS currency_sign")
}

// Get returns the package.
func (r *PackageRepository) Get(ctx context.Context, id uuid.UUID) (*domain.Package, error) {
	return getPackage(selectPackages(r.db.WithContext(ctx)), id)
}

func getPackage(query *gorm.DB, id uuid.UUID) (*domain.Package, error) {
	var row packageRow
	err := query.Where("p.id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, domain.PackageNotFound(id.String())
	}
	if err != nil {
		return nil, fmt.Errorf("get package %s: %w", id, err)
	}
	return toDomainPackage(row), nil
}

// Create inserts the package; a taken code is an apperror conflict. The
// code is claimed with ON CONFLICT (code) DO NOTHING rather than by catching
// the unique violation, so an admin's duplicate is not logged as a database
// error.
func (r *PackageRepository) Create(ctx context.Context, p *domain.Package) error {
	created, err := r.CreateIfCodeAbsent(ctx, p)
	if err != nil {
		return err
	}
	if !created {
		return codeTaken(p.Code(), nil)
	}
	return nil
}

// CreateIfCodeAbsent inserts the package unless its code is taken.
func (r *PackageRepository) CreateIfCodeAbsent(ctx context.Context, p *domain.Package) (bool, error) {
	m := toDBPackage(p)
	res := r.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "code"}}, DoNothing: true,
	}).Create(&m)
	if res.Error != nil {
		return false, fmt.Errorf("insert package %q: %w", p.Code(), res.Error)
	}
	return res.RowsAffected == 1, nil
}

// UpdatePackage locks the package row (FOR UPDATE OF p: not the shared
// currency row), runs update and writes every column back. Purchases are
// not touched: they hold their own snapshots (INV-2).
func (r *PackageRepository) UpdatePackage(ctx context.Context, id uuid.UUID, update func(*domain.Package) error) error {
	return postgres.InTx(ctx, r.db, func(tx postgres.Tx) error {
		query := selectPackages(tx.GORM()).Clauses(clause.Locking{
			Strength: clause.LockingStrengthUpdate, Table: clause.Table{Name: "p"},
		})
		p, err := getPackage(query, id)
		if err != nil {
			return err
		}
		if err := update(p); err != nil {
			return err
		}
		after := toDBPackage(p)
		err = tx.GORM().Model(&packageModel{}).Where("id = ?", id).Select(packageColumns).Updates(&after).Error
		if err != nil {
			return packageWriteError(p.Code(), err)
		}
		return nil
	})
}

// ListActive returns the active packages ordered by code.
func (r *PackageRepository) ListActive(ctx context.Context) ([]*domain.Package, error) {
	var rows []packageRow
	if err := selectPackages(r.db.WithContext(ctx)).Where("p.is_active").Order("p.code").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list active packages: %w", err)
	}
	out := make([]*domain.Package, len(rows))
	for i, row := range rows {
		out[i] = toDomainPackage(row)
	}
	return out, nil
}

// packageWriteError maps a taken code (the unique constraint's violation,
// when an update renames a package) to a conflict and wraps the rest.
func packageWriteError(code string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == packageCodeConstraint {
		return codeTaken(code, err)
	}
	return fmt.Errorf("write package %q: %w", code, err)
}

// codeTaken is the 409 of a package code that another package has.
func codeTaken(code string, cause error) error {
	return &apperror.Error{Kind: apperror.KindConflict, Slug: "package-code-taken",
		Detail: fmt.Sprintf("A promotion package with code %q already exists.", code), Err: cause}
}

// isLockNotAvailable reports whether err is PostgreSQL's lock_not_available
// (55P03), raised when lock_timeout expires.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
