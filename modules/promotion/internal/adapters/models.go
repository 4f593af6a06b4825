// Package adapters implements the promotion module's storage: GORM models
// of the promotion schema, the named converters between them and the
// domain, the repositories with their transactions, and the building of the
// purchase-changed event that goes into the outbox with every transition.
//
// GORM models exist only here; the domain never sees a gorm tag.
package adapters

import (
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Table names of the promotion schema (migrations/00002_promotion.sql).
const (
	currenciesTable      = "promotion.currencies"
	packagesTable        = "promotion.promotion_packages"
	purchasesTable       = "promotion.promotion_purchases"
	purchaseTargetsTable = "promotion.promotion_purchase_targets"
	expirePoisonTable    = "promotion.expire_poison"
	idempotencyKeysTable = "promotion.idempotency_keys"
)

// packageModel is a row of promotion.promotion_packages. Timestamps are
// never filled in by GORM: the domain decides them.
type packageModel struct {
	ID           uuid.UUID       `gorm:"column:id;primaryKey"`
	Code         string          `gorm:"column:code"`
	Name         string          `gorm:"column:name"`
	Kind         string          `gorm:"column:kind"`
	DurationDays int             `gorm:"column:duration_days"`
	BoostWeight  int             `gorm:"column:boost_weight"`
	PriceAmount  decimal.Decimal `gorm:"column:price_amount"`
	CurrencyID   int16           `gorm:"column:currency_id"`
	IsActive     bool            `gorm:"column:is_active"`
	CreatedAt    time.Time       `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt    time.Time       `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName tells GORM the schema-qualified table.
func (packageModel) TableName() string { return packagesTable }

// packageRow is a package joined with its currency, as packages are read.
type packageRow struct {
	Package         packageModel `gorm:"embedded"`
	CurrencyIsoCode string       `gorm:"column:currency_iso_code"`
	CurrencyName    string       `gorm:"column:currency_name"`
	CurrencySign    string       `gorm:"column:currency_sign"`
}

// purchaseModel is a row of promotion.promotion_purchases.
type purchaseModel struct {
	ID              uuid.UUID       `gorm:"column:id;primaryKey"`
	TenantID        uuid.UUID       `gorm:"column:tenant_id"`
	PackageID       uuid.UUID       `gorm:"column:package_id"`
	PackageCode     string          `gorm:"column:package_code"`
	PackageKind     string          `gorm:"column:package_kind"`
	BoostWeight     int             `gorm:"column:boost_weight"`
	PriceAmount     decimal.Decimal `gorm:"column:price_amount"`
	CurrencyID      int16           `gorm:"column:currency_id"`
	CurrencyIsoCode string          `gorm:"column:currency_iso_code"`
	CurrencyName    string          `gorm:"column:currency_name"`
	CurrencySign    string          `gorm:"column:currency_sign"`
	Status          string          `gorm:"column:status"`
	PaymentStatus   string          `gorm:"column:payment_status"`
	StartsAt        time.Time       `gorm:"column:starts_at"`
	EndsAt          time.Time       `gorm:"column:ends_at"`
	CancelReason    *string         `gorm:"column:cancel_reason"`
	CreatedByUserID uuid.UUID       `gorm:"column:created_by_user_id"`
	UpdatedByUserID uuid.NullUUID   `gorm:"column:updated_by_user_id"`
	CreatedAt       time.Time       `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt       time.Time       `gorm:"column:updated_at;autoUpdateTime:false"`
	Version         int64           `gorm:"column:version"`
}

// TableName tells GORM the schema-qualified table.
func (purchaseModel) TableName() string { return purchasesTable }

// targetModel is a row of promotion.promotion_purchase_targets.
type targetModel struct {
	PurchaseID uuid.UUID `gorm:"column:purchase_id;primaryKey"`
	TargetKind string    `gorm:"column:target_kind;primaryKey"`
	TargetID   uuid.UUID `gorm:"column:target_id;primaryKey"`
	Position   int16     `gorm:"column:position"`
}

// TableName tells GORM the schema-qualified table.
func (targetModel) TableName() string { return purchaseTargetsTable }

// idempotencyKeyModel is a row of promotion.idempotency_keys.
type idempotencyKeyModel struct {
	TenantID    uuid.UUID `gorm:"column:tenant_id;primaryKey"`
	Key         string    `gorm:"column:key;primaryKey"`
	RequestHash string    `gorm:"column:request_hash"`
	PurchaseID  uuid.UUID `gorm:"column:purchase_id"`
	CreatedAt   time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName tells GORM the schema-qualified table.
func (idempotencyKeyModel) TableName() string { return idempotencyKeysTable }
