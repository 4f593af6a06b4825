package contract

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
)

// NewEnvelope wraps p into an event of this contract: eventType,
// contractVersion, aggregateType and aggregateId (= p.PurchaseID) are filled
// in. Times are brought to UTC and truncated to microseconds, and the amount
// to two decimals when that is lossless, so the envelope equals what a
// consumer decodes from it. NewEnvelope does not validate; Marshal does.
func NewEnvelope(p PurchaseChanged, messageID uuid.UUID, occurredAt time.Time) Envelope {
	p.StartsAt = wireTime(p.StartsAt)
	p.EndsAt = wireTime(p.EndsAt)
	p.Price.Amount = NewAmount(p.Price.Amount.Decimal)
	p.Targets = append([]Target(nil), p.Targets...) // the caller's slice stays the caller's
	return Envelope{
		MessageID:       messageID,
		EventType:       EventType,
		ContractVersion: ContractVersion,
		OccurredAt:      wireTime(occurredAt),
		AggregateID:     p.PurchaseID,
		AggregateType:   AggregateType,
		Payload:         p,
	}
}

// FieldError is one broken rule, named by the JSON path of the field
// (payload.targets[2].targetId).
type FieldError struct {
	// Field is the JSON path of the offending field.
	Field string
	// Message says what is wrong with it.
	Message string
}

// ValidationError lists every rule an event breaks, so a producer bug is
// reported whole rather than one field per run.
type ValidationError struct {
	// Errors holds one entry per broken rule, in field order.
	Errors []FieldError
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Message
	}
	return "contract: invalid event: " + strings.Join(parts, "; ")
}

// Has reports whether field is among the broken ones.
func (e *ValidationError) Has(field string) bool {
	for _, f := range e.Errors {
		if f.Field == field {
			return true
		}
	}
	return false
}

// packageCodePattern is the package code rule of the admin API.
var packageCodePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Validate checks e against every rule the producer must keep. It is strict
// where Decode is lenient: only the enum values of this contract version, the
// exact envelope constants, 1 to MaxTargetsPerPurchase distinct targets with
// kinds the package admits, no nil ids, an amount in decimal(14,2) that is not
// negative, RUB only, endsAt after startsAt and a version of at least 1. It
// returns a *ValidationError naming each broken field, or nil.
func (e Envelope) Validate() error {
	v := &validation{}
	v.uuid("messageId", e.MessageID)
	v.check(e.EventType == EventType, "eventType", fmt.Sprintf("must be %q", EventType))
	v.check(e.ContractVersion == ContractVersion, "contractVersion", fmt.Sprintf("must be %d", ContractVersion))
	v.check(!e.OccurredAt.IsZero(), "occurredAt", "must be set")
	v.uuid("aggregateId", e.AggregateID)
	if e.AggregateID != uuid.Nil {
		v.check(e.AggregateID == e.Payload.PurchaseID, "aggregateId", "must equal payload.purchaseId")
	}
	v.check(e.AggregateType == AggregateType, "aggregateType", fmt.Sprintf("must be %q", AggregateType))

	p := e.Payload
	v.uuid("payload.purchaseId", p.PurchaseID)
	v.uuid("payload.tenantId", p.TenantID)
	v.uuid("payload.packageId", p.PackageID)
	v.check(packageCodePattern.MatchString(p.PackageCode), "payload.packageCode", "must match "+packageCodePattern.String())
	v.check(p.PackageKind.Known(), "payload.packageKind", fmt.Sprintf("unknown value %q", p.PackageKind))
	v.targets(p.PackageKind, p.Targets)
	v.check(p.Status.Known(), "payload.status", fmt.Sprintf("unknown value %q", p.Status))
	v.check(p.PaymentStatus.Known(), "payload.paymentStatus", fmt.Sprintf("unknown value %q", p.PaymentStatus))
	v.check(p.BoostWeight >= 1, "payload.boostWeight", "must be at least 1")
	v.check(!p.StartsAt.IsZero(), "payload.startsAt", "must be set")
	v.check(!p.EndsAt.IsZero(), "payload.endsAt", "must be set")
	if !p.StartsAt.IsZero() && !p.EndsAt.IsZero() {
		v.check(wireTime(p.EndsAt).After(wireTime(p.StartsAt)), "payload.endsAt", "must be after payload.startsAt")
	}
	v.price(p.Price)
	v.check(p.Version >= 1, "payload.version", "must be at least 1")

	if len(v.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: v.errs}
}

// validation collects FieldErrors.
type validation struct {
	errs []FieldError
}

func (v *validation) check(ok bool, field, message string) {
	if !ok {
		v.errs = append(v.errs, FieldError{Field: field, Message: message})
	}
}

func (v *validation) uuid(field string, id uuid.UUID) {
	v.check(id != uuid.Nil, field, "must not be the nil UUID")
}

func (v *validation) targets(kind PackageKind, targets []Target) {
	if len(targets) < 1 || len(targets) > MaxTargetsPerPurchase {
		v.check(false, "payload.targets", fmt.Sprintf("must have 1 to %d items, has %d", MaxTargetsPerPurchase, len(targets)))
	}
	admitted, kindKnown := admittedTargetKind[kind]
	seen := make(map[Target]int, len(targets))
	for i, t := range targets {
		field := fmt.Sprintf("payload.targets[%d]", i)
		switch {
		case !t.TargetKind.Known():
			v.check(false, field+".targetKind", fmt.Sprintf("unknown value %q", t.TargetKind))
		case kindKnown && t.TargetKind != admitted:
			v.check(false, field+".targetKind", fmt.Sprintf("package kind %s admits only %s", kind, admitted))
		}
		v.uuid(field+".targetId", t.TargetID)
		if j, dup := seen[t]; dup {
			v.check(false, field, fmt.Sprintf("duplicates payload.targets[%d]", j))
			continue
		}
		seen[t] = i
	}
}

func (v *validation) price(p Price) {
	a := p.Amount.Decimal
	v.check(!a.IsNegative(), "payload.price.amount", "must not be negative")
	v.check(hasAtMostTwoDecimals(a), "payload.price.amount", "must have at most 2 decimals")
	v.check(a.LessThanOrEqual(maxAmount), "payload.price.amount", "must fit decimal(14,2)")
	v.check(p.CurrencyID == CurrencyIDRUB, "payload.price.currencyId", fmt.Sprintf("must be %d (RUB)", CurrencyIDRUB))
	v.check(p.CurrencyID != CurrencyIDRUB || p.Currency.IsoCode == RUBCurrency().IsoCode,
		"payload.price.currency.isoCode", "must be RUB for currencyId 643")
	v.check(p.Currency.Name != "", "payload.price.currency.name", "must be set")
	v.check(p.Currency.Sign != "", "payload.price.currency.sign", "must be set")
}

// wireTimeLayout is RFC 3339 in UTC with exactly six fractional digits: the
// precision of PostgreSQL timestamptz, fixed width so the text sorts like the
// time.
const wireTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// wireTime brings t to what the wire can carry: UTC, whole microseconds.
func wireTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// formatTime writes t as the contract's timestamp.
func formatTime(t time.Time) string {
	return wireTime(t).Format(wireTimeLayout)
}
