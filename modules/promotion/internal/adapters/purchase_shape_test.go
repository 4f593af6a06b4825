package adapters

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// The purchase has three forms of its own: the row (purchaseModel and its
// target rows), the event's payload (contract.PurchaseChanged) and the HTTP
// response (ports). Each is written once, with one converter each way it is
// read; these tests hold the row and the event to the domain's fields
// (docs/adr/0026-the-lifecycle-once.md).

// TestPurchaseRowCarriesEveryDomainField: a purchase with every field set
// comes back from its row as it went in, so a field the domain gains and the
// row (or one of its two converters) lacks fails here.
func TestPurchaseRowCarriesEveryDomainField(t *testing.T) {
	t.Parallel()
	p := promotiontest.EveryFieldPurchase(t)
	row, targets := toDBPurchase(p)
	back, err := toDomainPurchase(row, targets)
	require.NoError(t, err)
	require.Equal(t, p, back)
}

// eventFields maps each domain field to the payload's JSON name that
// carries it, or to "" where the contract leaves it out on purpose.
var eventFields = map[string]string{
	"ID": "purchaseId", "TenantID": "tenantId", "PackageID": "packageId", "PackageCode": "packageCode",
	"PackageKind": "packageKind", "BoostWeight": "boostWeight", "Price": "price", "Targets": "targets",
	"Status": "status", "PaymentStatus": "paymentStatus", "StartsAt": "startsAt", "EndsAt": "endsAt",
	"Version":         "version",
	"CancelReason":    "", // internal free text
	"CreatedByUserID": "", // personal data
	"UpdatedByUserID": "", // personal data
	"CreatedAt":       "", // the event's occurredAt and startsAt say when
	"UpdatedAt":       "", // the envelope's occurredAt
}

// TestEventCarriesEveryDomainFieldOrSaysWhy: each domain field is carried by
// the payload or named as left out, and the payload of a purchase with every
// field set has exactly the carried fields, each non-empty.
func TestEventCarriesEveryDomainFieldOrSaysWhy(t *testing.T) {
	t.Parallel()
	payload, err := toContractPurchaseChanged(promotiontest.EveryFieldPurchase(t))
	require.NoError(t, err)
	promotiontest.RequireFormCarries(t, "event payload", eventFields, payload)
}
