package domain

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Limits of a promotion package.
const (
	MinDurationDays   = 1
	MaxDurationDays   = 365
	MinBoostWeight    = 1
	MaxBoostWeight    = 1000
	MaxPackageCodeLen = 64
	MaxPackageNameLen = 200
)

// packageCodeRE is the shape of a package code: lower-case words joined by
// single hyphens, e.g. project-boost-week. Codes are stable identifiers that
// analytics read from events, so they are kept boring.
var packageCodeRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Package is a sellable promotion package. Editing it never changes the
// purchases already made of it: they hold snapshots (INV-2).
type Package struct {
	id           uuid.UUID
	code         string
	name         string
	kind         PackageKind
	durationDays int
	boostWeight  int
	price        Price
	isActive     bool
	createdAt    time.Time
	updatedAt    time.Time
}

// PackageSpec is everything a new package is made of.
type PackageSpec struct {
	Code         string
	Name         string
	Kind         PackageKind
	DurationDays int
	BoostWeight  int
	Amount       decimal.Decimal
	CurrencyID   int
	IsActive     bool
}

// NewPackage validates spec and returns the package, or one validation error
// naming every failed field (code, name, kind, durationDays, boostWeight,
// price.amount, price.currencyId).
func NewPackage(id uuid.UUID, spec PackageSpec, now time.Time) (*Package, error) {
	var errs fieldErrors
	if id == uuid.Nil {
		errs.add("id", "must not be the nil UUID")
	}
	now = normalizeTime(now)
	p := &Package{
		id:           id,
		code:         spec.Code,
		name:         strings.TrimSpace(spec.Name),
		kind:         spec.Kind,
		durationDays: spec.DurationDays,
		boostWeight:  spec.BoostWeight,
		price:        newPrice(spec.Amount, spec.CurrencyID, "price.", &errs),
		isActive:     spec.IsActive,
		createdAt:    now,
		updatedAt:    now,
	}
	p.validate(&errs)
	if err := errs.err("invalid promotion package"); err != nil {
		return nil, err
	}
	return p, nil
}

// PackageChanges is a partial update of a package: nil fields stay as they
// are.
type PackageChanges struct {
	Code         *string
	Name         *string
	Kind         *PackageKind
	DurationDays *int
	BoostWeight  *int
	Amount       *decimal.Decimal
	CurrencyID   *int
	IsActive     *bool
}

// IsEmpty reports whether the changes change nothing.
func (c PackageChanges) IsEmpty() bool {
	return c.Code == nil && c.Name == nil && c.Kind == nil && c.DurationDays == nil &&
		c.BoostWeight == nil && c.Amount == nil && c.CurrencyID == nil && c.IsActive == nil
}

// Update applies the changes as one: either every change is valid and the
// package takes them all, or it returns a validation error naming every
// failed field and the package stays unchanged.
func (p *Package) Update(c PackageChanges, now time.Time) error {
	next := *p
	var errs fieldErrors
	if c.Code != nil {
		next.code = *c.Code
	}
	if c.Name != nil {
		next.name = strings.TrimSpace(*c.Name)
	}
	if c.Kind != nil {
		next.kind = *c.Kind
	}
	if c.DurationDays != nil {
		next.durationDays = *c.DurationDays
	}
	if c.BoostWeight != nil {
		next.boostWeight = *c.BoostWeight
	}
	if c.Amount != nil || c.CurrencyID != nil {
		amount, currencyID := p.price.amount, int(p.price.currencyID)
		if c.Amount != nil {
			amount = *c.Amount
		}
		if c.CurrencyID != nil {
			currencyID = *c.CurrencyID
		}
		next.price = newPrice(amount, currencyID, "price.", &errs)
	}
	if c.IsActive != nil {
		next.isActive = *c.IsActive
	}
	next.validate(&errs)
	if err := errs.err("invalid promotion package"); err != nil {
		return err
	}
	next.updatedAt = normalizeTime(now)
	*p = next
	return nil
}

func (p *Package) validate(errs *fieldErrors) {
	switch {
	case p.code == "":
		errs.add("code", "is required")
	case len(p.code) > MaxPackageCodeLen:
		errs.add("code", "must be at most %d characters", MaxPackageCodeLen)
	case !packageCodeRE.MatchString(p.code):
		errs.add("code", "must match %s", packageCodeRE)
	}
	switch {
	case p.name == "":
		errs.add("name", "is required")
	case utf8.RuneCountInString(p.name) > MaxPackageNameLen:
		errs.add("name", "must be at most %d characters", MaxPackageNameLen)
	case hasControlChar(p.name):
		errs.add("name", controlCharMessage)
	}
	if !p.kind.IsValid() {
		errs.add("kind", "unknown package kind %q (want one of %v)", p.kind, PackageKinds)
	}
	if p.durationDays < MinDurationDays || p.durationDays > MaxDurationDays {
		errs.add("durationDays", "must be from %d to %d", MinDurationDays, MaxDurationDays)
	}
	if p.boostWeight < MinBoostWeight || p.boostWeight > MaxBoostWeight {
		errs.add("boostWeight", "must be from %d to %d", MinBoostWeight, MaxBoostWeight)
	}
}

// UnmarshalPackageFromDatabase rebuilds a stored package. It exists only for
// repositories: it trusts the row (the table's CHECKs enforce the same
// rules) and does not stamp new times.
func UnmarshalPackageFromDatabase(
	id uuid.UUID, code, name string, kind PackageKind, durationDays, boostWeight int,
	price Price, isActive bool, createdAt, updatedAt time.Time,
) *Package {
	return &Package{
		id: id, code: code, name: name, kind: kind, durationDays: durationDays, boostWeight: boostWeight,
		price: price, isActive: isActive, createdAt: createdAt.UTC(), updatedAt: updatedAt.UTC(),
	}
}

// ID returns the package's id.
func (p *Package) ID() uuid.UUID { return p.id }

// Code returns the package's stable code, e.g. project-boost-week.
func (p *Package) Code() string { return p.code }

// Name returns the display name.
func (p *Package) Name() string { return p.name }

// Kind returns what the package promotes.
func (p *Package) Kind() PackageKind { return p.kind }

// DurationDays returns how many days a purchase of the package lasts.
func (p *Package) DurationDays() int { return p.durationDays }

// Duration returns the period a purchase of the package lasts. A day is
// 24 hours: promotions run on UTC instants, not calendar days.
func (p *Package) Duration() time.Duration { return time.Duration(p.durationDays) * 24 * time.Hour }

// BoostWeight returns the weight a purchase adds to its targets' ranking.
func (p *Package) BoostWeight() int { return p.boostWeight }

// Price returns the list price.
func (p *Package) Price() Price { return p.price }

// IsActive reports whether the package can be bought.
func (p *Package) IsActive() bool { return p.isActive }

// CreatedAt returns when the package was created.
func (p *Package) CreatedAt() time.Time { return p.createdAt }

// UpdatedAt returns when the package was last changed.
func (p *Package) UpdatedAt() time.Time { return p.updatedAt }

// normalizeTime makes a time fit for storage and comparison: UTC, and
// microseconds, the precision of timestamptz, so a value read back equals
// the value written.
func normalizeTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
