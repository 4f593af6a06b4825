package ports_test

import (
	"testing"

	"github.com/pinmarket/pin/modules/promotion/internal/ports"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// httpFields maps each domain field to the purchase response's JSON name
// that carries it, or to "" where the API leaves it out on purpose
// (docs/adr/0026-the-lifecycle-once.md).
var httpFields = map[string]string{
	"ID": "id", "TenantID": "tenantId", "PackageID": "packageId", "PackageCode": "packageCode",
	"PackageKind": "packageKind", "BoostWeight": "boostWeight", "Price": "price", "Targets": "targets",
	"Status": "status", "PaymentStatus": "paymentStatus", "StartsAt": "startsAt", "EndsAt": "endsAt",
	"CancelReason": "cancelReason", "CreatedAt": "createdAt", "UpdatedAt": "updatedAt", "Version": "version",
	"CreatedByUserID": "", // personal data: the API names no actor
	"UpdatedByUserID": "", // personal data
}

// TestHTTPPurchaseCarriesEveryDomainFieldOrSaysWhy: each domain field is
// carried by the HTTP response or named as left out, and the response for
// a purchase with every field set has exactly the carried fields, each
// non-empty.
func TestHTTPPurchaseCarriesEveryDomainFieldOrSaysWhy(t *testing.T) {
	t.Parallel()
	promotiontest.RequireFormCarries(t, "HTTP response", httpFields, ports.PurchaseResponseJSON(promotiontest.EveryFieldPurchase(t)))
}
