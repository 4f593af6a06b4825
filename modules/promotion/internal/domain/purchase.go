// Package domain holds the promotion context's model: the PromotionPurchase
// aggregate with its lifecycle and invariants, and the PromotionPackage that
// is sold. It knows nothing of storage, HTTP or messaging. The invariants
// and decisions cited by name (INV-2, INV-6, decision No. 10, ADR-0048) are
// explained in docs/glossary.md.
package domain

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxTargetsPerPurchase bounds the targets of one purchase, which also bounds
// the size of its events.
const MaxTargetsPerPurchase = 10

// MaxCancelReasonLen bounds the free-text reason of a cancellation.
const MaxCancelReasonLen = 500

// Purchase is the PromotionPurchase aggregate: a tenant's purchase of a
// package for 1..MaxTargetsPerPurchase targets. The package's code, kind,
// boost weight and price are snapshots taken at purchase time (INV-2).
// Every transition raises Version by one; Expired and Cancelled are
// terminal (INV-6).
//
// Its fields are those of PurchaseFromDatabase, kept unexported: only the
// methods below change them, and a repository sees them through the getters.
type Purchase struct {
	s PurchaseFromDatabase
}

// NewPurchaseParams is what a new purchase is made of.
type NewPurchaseParams struct {
	ID        uuid.UUID
	TenantID  uuid.UUID
	CreatedBy uuid.UUID // the user who buys (the token's subject)
	PackageID uuid.UUID // as asked for; uuid.Nil when the request named none
	Package   *Package  // nil when there is no package PackageID
	Targets   []TargetRef
	Now       time.Time
}

// NewPurchase creates a purchase in no-payment mode (decision No. 10): it
// is created Pending and activated in the same operation, so it comes back
// Active with PaymentStatus NotRequired, StartsAt = Now, EndsAt = StartsAt +
// DurationDays×24h and Version 1. No Pending purchase is ever left behind.
//
// It fails with one validation error naming every failed field: packageId
// (missing or inactive package), targets (none or too many), targets[i]
// (a repeated target), targets[i].targetKind (unknown, or not admitted by
// the package kind), targets[i].targetId (nil UUID).
func NewPurchase(p NewPurchaseParams) (*Purchase, error) {
	var errs fieldErrors
	if p.ID == uuid.Nil {
		errs.add("id", "must not be the nil UUID")
	}
	if p.TenantID == uuid.Nil {
		errs.add("tenantId", "must not be the nil UUID")
	}
	if p.CreatedBy == uuid.Nil {
		errs.add("createdByUserId", "must not be the nil UUID")
	}
	admitted, pkgOK := TargetKind(""), false
	switch {
	case p.Package == nil && p.PackageID == uuid.Nil:
		errs.add("packageId", "is required")
	case p.Package == nil:
		errs.add("packageId", "no such package")
	case !p.Package.IsActive():
		errs.add("packageId", "the package %q is not active", p.Package.Code())
	default:
		admitted, pkgOK = p.Package.Kind().AdmittedTargetKind()
	}
	targets := validateTargets(p.Targets, admitted, pkgOK, &errs)
	if err := errs.err("invalid promotion purchase"); err != nil {
		return nil, err
	}

	now := normalizeTime(p.Now)
	purchase := &Purchase{s: PurchaseFromDatabase{
		ID:              p.ID,
		TenantID:        p.TenantID,
		PackageID:       p.Package.ID(),
		PackageCode:     p.Package.Code(),
		PackageKind:     p.Package.Kind(),
		BoostWeight:     p.Package.BoostWeight(),
		Price:           p.Package.Price(),
		Targets:         targets,
		Status:          StatusPending,
		PaymentStatus:   PaymentNotRequired,
		CreatedByUserID: p.CreatedBy,
		CreatedAt:       now,
		UpdatedAt:       now,
		Version:         0, // the Pending state is never stored; activation makes it 1
	}}
	purchase.activate(now, p.Package.Duration())
	return purchase, nil
}

// validateTargets turns refs into targets, recording each broken rule under
// its index. When the package is unknown, admission is not checked: the
// packageId error already says what is wrong.
func validateTargets(refs []TargetRef, admitted TargetKind, checkAdmission bool, errs *fieldErrors) []Target {
	switch {
	case len(refs) == 0:
		errs.add("targets", "at least one target is required")
		return nil
	case len(refs) > MaxTargetsPerPurchase:
		errs.add("targets", "at most %d targets are allowed, got %d", MaxTargetsPerPurchase, len(refs))
		return nil
	}
	targets := make([]Target, 0, len(refs))
	firstIndex := make(map[Target]int, len(refs))
	for i, ref := range refs {
		prefix := fmt.Sprintf("targets[%d].", i)
		before := len(*errs)
		validateTarget(ref.Kind, ref.ID, prefix, errs)
		if ref.Kind.IsValid() && checkAdmission && ref.Kind != admitted {
			errs.add(prefix+"targetKind", "the package admits only %s targets", admitted)
		}
		if len(*errs) > before {
			continue
		}
		t := Target{kind: ref.Kind, id: ref.ID}
		if j, seen := firstIndex[t]; seen {
			errs.add(fmt.Sprintf("targets[%d]", i), "repeats targets[%d]", j)
			continue
		}
		firstIndex[t] = i
		targets = append(targets, t)
	}
	return targets
}

// activate is Pending -> Active. In no-payment mode it runs only inside
// NewPurchase; a payment flow would call it when the payment is confirmed.
func (p *Purchase) activate(now time.Time, duration time.Duration) {
	p.s.Status = StatusActive
	p.s.StartsAt = now
	p.s.EndsAt = now.Add(duration)
	p.touch(now)
}

// Cancel is Active -> Cancelled or Pending -> Cancelled, by a tenant's user
// or an admin. reason is required (1..MaxCancelReasonLen characters, trimmed)
// because a cancellation is a manual act that someone will ask about later.
// A terminal purchase cannot be cancelled (INV-6): that is a conflict.
func (p *Purchase) Cancel(reason string, by uuid.UUID, at time.Time) error {
	reason = strings.TrimSpace(reason)
	var errs fieldErrors
	switch {
	case reason == "":
		errs.add("reason", "is required")
	case utf8.RuneCountInString(reason) > MaxCancelReasonLen:
		errs.add("reason", "must be at most %d characters", MaxCancelReasonLen)
	case hasControlChar(reason):
		errs.add("reason", controlCharMessage)
	}
	if err := errs.err("invalid cancellation"); err != nil {
		return err
	}
	if p.s.Status.IsTerminal() {
		return transitionConflict("purchase-terminal", ErrPurchaseTerminal,
			"purchase %s is already %s", p.s.ID, p.s.Status)
	}
	p.s.Status = StatusCancelled
	p.s.CancelReason = reason
	p.s.UpdatedByUserID = by
	p.touch(normalizeTime(at))
	return nil
}

// Expire is Active -> Expired, done by the System actor once EndsAt <= asOf.
// The acting user is cleared: the last change was made by no user.
func (p *Purchase) Expire(asOf time.Time) error {
	asOf = normalizeTime(asOf)
	switch {
	case p.s.Status.IsTerminal():
		return transitionConflict("purchase-terminal", ErrPurchaseTerminal,
			"purchase %s is already %s", p.s.ID, p.s.Status)
	case p.s.Status != StatusActive:
		return transitionConflict("purchase-transition-not-allowed", ErrTransitionNotAllowed,
			"purchase %s is %s; only an Active purchase expires", p.s.ID, p.s.Status)
	case p.s.EndsAt.After(asOf):
		return transitionConflict("purchase-not-due", ErrPurchaseNotDue,
			"purchase %s ends at %s, after %s", p.s.ID, p.s.EndsAt.Format(time.RFC3339Nano), asOf.Format(time.RFC3339Nano))
	}
	p.s.Status = StatusExpired
	p.s.UpdatedByUserID = uuid.Nil
	p.touch(asOf)
	return nil
}

// touch records a transition: one more version, and when it happened.
func (p *Purchase) touch(at time.Time) {
	p.s.Version++
	p.s.UpdatedAt = at
}

// IsVisibleTo reports whether a caller may see the purchase: an admin sees
// every purchase, anyone else only the purchases of their own tenant.
func (p *Purchase) IsVisibleTo(tenantID uuid.UUID, isAdmin bool) bool {
	return isAdmin || (tenantID != uuid.Nil && tenantID == p.s.TenantID)
}

// PurchaseFromDatabase is a stored purchase, field by field, as a
// repository reads it; it is also the aggregate's state.
type PurchaseFromDatabase struct {
	ID              uuid.UUID
	TenantID        uuid.UUID
	PackageID       uuid.UUID
	PackageCode     string
	PackageKind     PackageKind
	BoostWeight     int
	Price           Price
	Targets         []Target
	Status          Status
	PaymentStatus   PaymentStatus
	StartsAt        time.Time
	EndsAt          time.Time
	CancelReason    string
	CreatedByUserID uuid.UUID
	UpdatedByUserID uuid.UUID
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Version         int64
}

// UnmarshalPurchaseFromDatabase rebuilds a stored purchase. It exists only
// for repositories. It rejects unknown enum values (a row no code of ours
// can have written) but accepts a purchase with no targets: such a row is
// a poison item that still has to be loadable to be reported, and the event
// builder refuses it.
func UnmarshalPurchaseFromDatabase(r PurchaseFromDatabase) (*Purchase, error) {
	switch {
	case !r.Status.IsValid():
		return nil, fmt.Errorf("purchase %s: unknown status %q", r.ID, r.Status)
	case !r.PaymentStatus.IsValid():
		return nil, fmt.Errorf("purchase %s: unknown payment status %q", r.ID, r.PaymentStatus)
	case !r.PackageKind.IsValid():
		return nil, fmt.Errorf("purchase %s: unknown package kind %q", r.ID, r.PackageKind)
	}
	for _, t := range r.Targets {
		if !t.kind.IsValid() {
			return nil, fmt.Errorf("purchase %s: unknown target kind %q", r.ID, t.kind)
		}
	}
	r.Targets = append([]Target(nil), r.Targets...)
	r.StartsAt, r.EndsAt = r.StartsAt.UTC(), r.EndsAt.UTC()
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return &Purchase{s: r}, nil
}

// UnmarshalTargetFromDatabase rebuilds a stored target without validation;
// UnmarshalPurchaseFromDatabase checks the kinds of the whole set.
func UnmarshalTargetFromDatabase(kind TargetKind, id uuid.UUID) Target {
	return Target{kind: kind, id: id}
}

// ID returns the purchase's id (the event's AggregateId and Kafka key).
func (p *Purchase) ID() uuid.UUID { return p.s.ID }

// TenantID returns the buying company.
func (p *Purchase) TenantID() uuid.UUID { return p.s.TenantID }

// PackageID returns the package bought.
func (p *Purchase) PackageID() uuid.UUID { return p.s.PackageID }

// PackageCode returns the package's code at purchase time.
func (p *Purchase) PackageCode() string { return p.s.PackageCode }

// PackageKind returns the package's kind at purchase time.
func (p *Purchase) PackageKind() PackageKind { return p.s.PackageKind }

// BoostWeight returns the package's boost weight at purchase time.
func (p *Purchase) BoostWeight() int { return p.s.BoostWeight }

// Price returns the package's price at purchase time.
func (p *Purchase) Price() Price { return p.s.Price }

// Targets returns a copy of the targets, in the order the buyer gave them.
func (p *Purchase) Targets() []Target { return append([]Target(nil), p.s.Targets...) }

// Status returns the lifecycle status.
func (p *Purchase) Status() Status { return p.s.Status }

// PaymentStatus returns where the payment stands.
func (p *Purchase) PaymentStatus() PaymentStatus { return p.s.PaymentStatus }

// StartsAt returns when the promotion started (the activation).
func (p *Purchase) StartsAt() time.Time { return p.s.StartsAt }

// EndsAt returns when the promotion ends.
func (p *Purchase) EndsAt() time.Time { return p.s.EndsAt }

// CancelReason returns why the purchase was cancelled, or "".
func (p *Purchase) CancelReason() string { return p.s.CancelReason }

// CreatedByUserID returns the user who bought.
func (p *Purchase) CreatedByUserID() uuid.UUID { return p.s.CreatedByUserID }

// UpdatedByUserID returns the user of the last change, or uuid.Nil when no
// user made it (creation, or expiry by the System actor).
func (p *Purchase) UpdatedByUserID() uuid.UUID { return p.s.UpdatedByUserID }

// CreatedAt returns when the purchase was made.
func (p *Purchase) CreatedAt() time.Time { return p.s.CreatedAt }

// UpdatedAt returns when the purchase last changed.
func (p *Purchase) UpdatedAt() time.Time { return p.s.UpdatedAt }

// Version returns the domain version: 1 after activation, one more per
// transition. Consumers use it as their ordering guard.
func (p *Purchase) Version() int64 { return p.s.Version }
