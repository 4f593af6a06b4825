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

// isoCodePattern is an ISO 4217 letter code, as the schema states it.
var isoCodePattern = regexp.MustCompile(`^[A-Z]{3}$`)

// maxPackageCodeLength bounds payload.packageCode, as the packages table
// does; the producer keeps it (the released schema does not say it).
const maxPackageCodeLength = 64

// Validate checks e against every rule the producer must keep. It is strict
// where Decode is lenient: only the enum values of this contract version, the
// exact envelope constants, 1 to MaxTargetsPerPurchase distinct targets with
// kinds the package admits, no nil ids, an amount in decimal(14,2) that is not
// negative, RUB only, endsAt after startsAt and a version of at least 1. It
// returns a *ValidationError naming each broken field, or nil.
func (e Envelope) Validate() error {
	return e.check(true)
}

// CheckBounds checks a decoded event against the bounds every record of the
// topic keeps, whatever revision of the contract wrote it: the rules of
// Validate that the released consumer-facing JSON Schema also states, and no
// more: a record that schema admits is never refused. So an enum value it
// does not know passes if it has an enum's shape (a non-empty string), a
// contractVersion above 1 passes, and the eventType and aggregateType are
// left to Decode. Targets 1 to
// MaxTargetsPerPurchase, a version of at least 1, no nil ids, the amount,
// the currency and the package code are held as Validate holds them. It
// returns a *ValidationError naming each broken field, or nil; DecodeRecord
// calls it.
func (e Envelope) CheckBounds() error {
	return e.check(false)
}

// check applies the producer's rules when strict, the consumer's bounds
// otherwise; both lists name the fields in the same order.
func (e Envelope) check(strict bool) error {
	v := &validation{strict: strict}
	v.uuid("messageId", e.MessageID)
	if strict {
		v.check(e.EventType == EventType, "eventType", fmt.Sprintf("must be %q", EventType))
		v.check(e.ContractVersion == ContractVersion, "contractVersion", fmt.Sprintf("must be %d", ContractVersion))
	} else {
		v.check(e.ContractVersion >= 1, "contractVersion", "must be at least 1")
	}
	v.check(!e.OccurredAt.IsZero(), "occurredAt", "must be set")
	v.uuid("aggregateId", e.AggregateID)
	if e.AggregateID != uuid.Nil {
		v.check(e.AggregateID == e.Payload.PurchaseID, "aggregateId", "must equal payload.purchaseId")
	}
	if strict {
		v.check(e.AggregateType == AggregateType, "aggregateType", fmt.Sprintf("must be %q", AggregateType))
	}

	p := e.Payload
	v.uuid("payload.purchaseId", p.PurchaseID)
	v.uuid("payload.tenantId", p.TenantID)
	v.uuid("payload.packageId", p.PackageID)
	v.check(packageCodePattern.MatchString(p.PackageCode), "payload.packageCode", "must match "+packageCodePattern.String())
	if strict {
		v.check(len(p.PackageCode) <= maxPackageCodeLength, "payload.packageCode", fmt.Sprintf("must be at most %d characters", maxPackageCodeLength))
	}
	v.enum("payload.packageKind", string(p.PackageKind), p.PackageKind.Known())
	v.targets(p.PackageKind, p.Targets)
	v.enum("payload.status", string(p.Status), p.Status.Known())
	v.enum("payload.paymentStatus", string(p.PaymentStatus), p.PaymentStatus.Known())
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

// validation collects FieldErrors; strict holds enums to the values of this
// contract version rather than to their shape.
type validation struct {
	strict bool
	errs   []FieldError
}

func (v *validation) check(ok bool, field, message string) {
	if !ok {
		v.errs = append(v.errs, FieldError{Field: field, Message: message})
	}
}

func (v *validation) uuid(field string, id uuid.UUID) {
	v.check(id != uuid.Nil, field, "must not be the nil UUID")
}

// enum checks an open enum's value: one of this version's when strict, a
// non-empty string otherwise (what the released schema admits).
func (v *validation) enum(field, value string, known bool) {
	if v.strict {
		v.check(known, field, fmt.Sprintf("unknown value %q", value))
		return
	}
	v.check(value != "", field, "must not be empty")
}

func (v *validation) targets(kind PackageKind, targets []Target) {
	if len(targets) < 1 || len(targets) > MaxTargetsPerPurchase {
		v.check(false, "payload.targets", fmt.Sprintf("must have 1 to %d items, has %d", MaxTargetsPerPurchase, len(targets)))
		if len(targets) > MaxTargetsPerPurchase && !v.strict {
			return // a hostile record's thousands of targets are not worth an error each
		}
	}
	admitted, kindKnown := admittedTargetKind[kind]
	seen := make(map[Target]int, len(targets))
	for i, t := range targets {
		field := fmt.Sprintf("payload.targets[%d]", i)
		switch {
		case !v.strict:
			v.enum(field+".targetKind", string(t.TargetKind), t.TargetKind.Known())
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
	if v.strict {
		v.check(p.CurrencyID != CurrencyIDRUB || p.Currency.IsoCode == RUBCurrency().IsoCode,
			"payload.price.currency.isoCode", "must be RUB for currencyId 643")
	} else {
		v.check(isoCodePattern.MatchString(p.Currency.IsoCode), "payload.price.currency.isoCode", "must be three capital letters")
	}
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
