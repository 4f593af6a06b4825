package contract_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// TestValidateAcceptsEveryGolden makes sure the fixtures are valid, so each
// bad case below fails for its own reason only.
func TestValidateAcceptsEveryGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenCases(t) {
		require.NoError(t, tc.envelope.Validate(), tc.name)
	}
}

// TestValidateRejects breaks one rule at a time and expects Validate to name
// the field, Marshal to refuse the event, and (where JSON Schema can express
// the rule) the strict schema to reject the unvalidated wire form as well.
func TestValidateRejects(t *testing.T) {
	t.Parallel()
	s := compileSchemas(t)
	targets := func(n int) []contract.Target {
		ts := make([]contract.Target, n)
		for i := range ts {
			ts[i] = contract.Target{TargetKind: contract.TargetProject, TargetID: uuid.New()}
		}
		return ts
	}
	cases := []struct {
		name   string
		field  string
		mutate func(e *contract.Envelope)
		// also lists fields that the same mistake necessarily breaks too.
		also []string
		// inSchema: JSON Schema can express the rule, so the strict schema
		// rejects the wire form too.
		inSchema bool
	}{
		{"nil messageId", "messageId", func(e *contract.Envelope) { e.MessageID = uuid.Nil }, nil, true},
		{"wrong eventType", "eventType", func(e *contract.Envelope) { e.EventType = "pin.catalog.promotions" }, nil, true},
		{"contractVersion 2", "contractVersion", func(e *contract.Envelope) { e.ContractVersion = 2 }, nil, true},
		{"contractVersion 0", "contractVersion", func(e *contract.Envelope) { e.ContractVersion = 0 }, nil, true},
		{"zero occurredAt", "occurredAt", func(e *contract.Envelope) { e.OccurredAt = time.Time{} }, nil, false},
		{"nil aggregateId", "aggregateId", func(e *contract.Envelope) { e.AggregateID = uuid.Nil }, nil, true},
		{"aggregateId not purchaseId", "aggregateId", func(e *contract.Envelope) { e.AggregateID = uuid.New() }, nil, false},
		{"wrong aggregateType", "aggregateType", func(e *contract.Envelope) { e.AggregateType = "Purchase" }, nil, true},
		{"nil purchaseId", "payload.purchaseId", func(e *contract.Envelope) { e.Payload.PurchaseID = uuid.Nil }, []string{"aggregateId"}, true},
		{"nil tenantId", "payload.tenantId", func(e *contract.Envelope) { e.Payload.TenantID = uuid.Nil }, nil, true},
		{"nil packageId", "payload.packageId", func(e *contract.Envelope) { e.Payload.PackageID = uuid.Nil }, nil, true},
		{"empty packageCode", "payload.packageCode", func(e *contract.Envelope) { e.Payload.PackageCode = "" }, nil, true},
		{"bad packageCode", "payload.packageCode", func(e *contract.Envelope) { e.Payload.PackageCode = "Project_Boost" }, nil, true},
		{"unknown packageKind", "payload.packageKind", func(e *contract.Envelope) { e.Payload.PackageKind = unknownPackageKind }, nil, true},
		{"no targets", "payload.targets", func(e *contract.Envelope) { e.Payload.Targets = nil }, nil, true},
		{"eleven targets", "payload.targets", func(e *contract.Envelope) { e.Payload.Targets = targets(11) }, nil, true},
		{"unknown targetKind", "payload.targets[1].targetKind", func(e *contract.Envelope) { e.Payload.Targets[1].TargetKind = unknownTargetKind }, nil, true},
		{"target kind the package does not admit", "payload.targets[0].targetKind", func(e *contract.Envelope) {
			e.Payload.Targets[0].TargetKind = contract.TargetPost
		}, nil, false},
		{"nil targetId", "payload.targets[0].targetId", func(e *contract.Envelope) { e.Payload.Targets[0].TargetID = uuid.Nil }, nil, true},
		{"duplicate target", "payload.targets[1]", func(e *contract.Envelope) { e.Payload.Targets[1] = e.Payload.Targets[0] }, nil, true},
		{"unknown status", "payload.status", func(e *contract.Envelope) { e.Payload.Status = unknownStatus }, nil, true},
		{"empty status", "payload.status", func(e *contract.Envelope) { e.Payload.Status = "" }, nil, true},
		{"unknown paymentStatus", "payload.paymentStatus", func(e *contract.Envelope) { e.Payload.PaymentStatus = unknownPaymentStatus }, nil, true},
		{"boostWeight 0", "payload.boostWeight", func(e *contract.Envelope) { e.Payload.BoostWeight = 0 }, nil, true},
		{"zero startsAt", "payload.startsAt", func(e *contract.Envelope) { e.Payload.StartsAt = time.Time{} }, nil, false},
		{"zero endsAt", "payload.endsAt", func(e *contract.Envelope) { e.Payload.EndsAt = time.Time{} }, nil, false},
		{"endsAt equals startsAt", "payload.endsAt", func(e *contract.Envelope) { e.Payload.EndsAt = e.Payload.StartsAt }, nil, false},
		{"endsAt before startsAt", "payload.endsAt", func(e *contract.Envelope) {
			e.Payload.EndsAt = e.Payload.StartsAt.Add(-time.Hour)
		}, nil, false},
		{"endsAt after startsAt by less than a microsecond", "payload.endsAt", func(e *contract.Envelope) {
			e.Payload.EndsAt = e.Payload.StartsAt.Add(500 * time.Nanosecond)
		}, nil, false},
		{"negative amount", "payload.price.amount", func(e *contract.Envelope) { e.Payload.Price.Amount = mustAmount(t, "-0.01") }, nil, true},
		{"amount with 3 decimals", "payload.price.amount", func(e *contract.Envelope) { e.Payload.Price.Amount = mustAmount(t, "10.005") }, nil, true},
		{"amount beyond decimal(14,2)", "payload.price.amount", func(e *contract.Envelope) {
			e.Payload.Price.Amount = mustAmount(t, "1000000000000")
		}, nil, true},
		{"currency other than RUB", "payload.price.currencyId", func(e *contract.Envelope) { e.Payload.Price.CurrencyID = 840 }, nil, true},
		{"isoCode not RUB", "payload.price.currency.isoCode", func(e *contract.Envelope) { e.Payload.Price.Currency.IsoCode = "USD" }, nil, false},
		{"empty currency name", "payload.price.currency.name", func(e *contract.Envelope) { e.Payload.Price.Currency.Name = "" }, nil, true},
		{"empty currency sign", "payload.price.currency.sign", func(e *contract.Envelope) { e.Payload.Price.Currency.Sign = "" }, nil, true},
		{"version 0", "payload.version", func(e *contract.Envelope) { e.Payload.Version = 0 }, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := validEnvelope(t)
			tc.mutate(&e)

			err := e.Validate()
			var verr *contract.ValidationError
			require.ErrorAs(t, err, &verr)
			require.True(t, verr.Has(tc.field), "want %s named, got %v", tc.field, err)
			allowed := append([]string{tc.field}, tc.also...)
			for _, f := range verr.Errors {
				require.Contains(t, allowed, f.Field, "only the broken rule is reported: %v", err)
			}

			_, err = contract.Marshal(e)
			require.ErrorAs(t, err, &verr, "Marshal validates")

			if tc.inSchema {
				wire, err := json.Marshal(e) // the unvalidated wire form
				require.NoError(t, err)
				require.Error(t, s.strict.Validate(instance(t, wire)), "strict schema must agree with Validate")
			}
		})
	}
}

// TestValidateReportsEveryBrokenRule checks that a badly built event is
// reported whole.
func TestValidateReportsEveryBrokenRule(t *testing.T) {
	t.Parallel()
	err := contract.Envelope{}.Validate()
	var verr *contract.ValidationError
	require.True(t, errors.As(err, &verr))
	for _, f := range []string{"messageId", "eventType", "contractVersion", "occurredAt", "aggregateId", "aggregateType",
		"payload.purchaseId", "payload.tenantId", "payload.packageId", "payload.packageCode", "payload.packageKind",
		"payload.targets", "payload.status", "payload.paymentStatus", "payload.boostWeight", "payload.startsAt",
		"payload.endsAt", "payload.price.currencyId", "payload.price.currency.name", "payload.price.currency.sign",
		"payload.version"} {
		require.True(t, verr.Has(f), "%s not reported in %v", f, err)
	}
	require.Contains(t, err.Error(), "payload.targets: must have 1 to 10 items, has 0")
}

// TestMaxTargetsAccepted pins the upper bound itself as valid.
func TestMaxTargetsAccepted(t *testing.T) {
	t.Parallel()
	e := validEnvelope(t)
	e.Payload.Targets = nil
	for range contract.MaxTargetsPerPurchase {
		e.Payload.Targets = append(e.Payload.Targets, contract.Target{TargetKind: contract.TargetProject, TargetID: uuid.New()})
	}
	require.NoError(t, e.Validate())
}
