package promotion_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
)

func TestPurchaseActivatesAndPublishesOneEvent(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	targets := []uuid.UUID{uuid.New(), uuid.New()}

	before := time.Now().UTC().Add(-time.Second)
	res := b.do(t, request{
		method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, tenant),
		body:   purchaseBody(pkg.ID, "Project", targets...),
		header: map[string]string{"X-Request-ID": "req-purchase-1"},
	})
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var p purchaseJSON
	res.decode(t, &p)
	require.Equal(t, purchasesPath+"/"+p.ID, res.header.Get("Location"))

	require.Equal(t, "Active", p.Status)
	require.Equal(t, "NotRequired", p.PaymentStatus)
	require.Equal(t, int64(1), p.Version)
	require.Equal(t, tenant.String(), p.TenantID)
	require.Equal(t, pkg.ID, p.PackageID)
	require.Equal(t, "project-boost-week", p.PackageCode)
	require.Equal(t, "ProjectBoost", p.PackageKind)
	require.Equal(t, 10, p.BoostWeight)
	require.Equal(t, json.Number("1500.00"), p.Price.Amount)
	require.Equal(t, 643, p.Price.CurrencyID)
	require.Equal(t, "RUB", p.Price.Currency.IsoCode)
	require.Equal(t, "Российский рубль", p.Price.Currency.Name)
	require.Equal(t, "₽", p.Price.Currency.Sign)
	require.Equal(t, []targetJSON{{"Project", targets[0].String()}, {"Project", targets[1].String()}}, p.Targets)
	require.True(t, p.StartsAt.After(before))
	require.Equal(t, 7*24*time.Hour, p.EndsAt.Sub(p.StartsAt))
	require.Equal(t, p.StartsAt, p.CreatedAt)
	require.Equal(t, time.UTC, p.StartsAt.Location())
	require.Nil(t, p.CancelReason)
	require.Contains(t, string(res.body), `"amount":1500.00`, "money is a number with two decimals")

	events := b.events(t)
	require.Len(t, events, 1)
	ev := events[0]
	env := ev.Envelope
	require.Equal(t, p.ID, env.AggregateID.String())
	require.Equal(t, contract.StatusActive, env.Payload.Status)
	require.Equal(t, contract.PaymentNotRequired, env.Payload.PaymentStatus)
	require.Equal(t, int64(1), env.Payload.Version)
	require.Equal(t, p.StartsAt, env.Payload.StartsAt)
	require.Equal(t, p.EndsAt, env.Payload.EndsAt)
	require.Equal(t, p.StartsAt, env.OccurredAt, "occurredAt is the moment of activation")
	require.Equal(t, "1500.00", env.Payload.Price.Amount.StringFixed(2))
	require.Equal(t, 10, env.Payload.BoostWeight)
	require.Len(t, env.Payload.Targets, 2)
	require.Equal(t, targets[0], env.Payload.Targets[0].TargetID)

	require.Equal(t, p.ID, ev.Metadata[kafka.MetaPartitionKey])
	require.Equal(t, contract.EventType, ev.Metadata[kafka.MetaEventType])
	require.Equal(t, "1", ev.Metadata[kafka.MetaContractVersion])
	require.Equal(t, "req-purchase-1", ev.Metadata[kafka.MetaCorrelationID])
	for _, secret := range []string{"createdByUserId", "updatedByUserId", "cancelReason", "CreatedBy"} {
		require.NotContains(t, string(ev.Raw), secret)
	}

	// And it reads back the same.
	got := b.do(t, request{method: http.MethodGet, path: purchasePath(p.ID), token: b.tenantToken(t, tenant)})
	require.Equal(t, http.StatusOK, got.status)
	var again purchaseJSON
	got.decode(t, &again)
	require.Equal(t, p, again)
}

func TestPurchaseEveryKindAdmitsItsTarget(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	token := b.tenantToken(t, uuid.New())
	for kind, target := range map[string]string{"ProjectBoost": "Project", "PropertyObjectBoost": "PropertyObject", "PostBoost": "Post"} {
		pkg := b.createPackage(t, strings.ToLower(kind), kind)
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: purchaseBody(pkg.ID, target, uuid.New())})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
	}
	require.Len(t, b.events(t), 3)
}

func TestPurchaseValidation(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	project := b.createPackage(t, "project-boost-week", "ProjectBoost")
	inactive := b.createPackage(t, "old-boost", "ProjectBoost")
	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + inactive.ID, token: b.adminToken(t),
		body: map[string]any{"isActive": false}})
	require.Equal(t, http.StatusOK, res.status)
	token := b.tenantToken(t, uuid.New())

	ids := func(n int) []uuid.UUID {
		out := make([]uuid.UUID, n)
		for i := range out {
			out[i] = uuid.New()
		}
		return out
	}
	dup := uuid.New()
	tests := []struct {
		name   string
		body   any
		fields []string
	}{
		{"unknown package", purchaseBody(uuid.NewString(), "Project", uuid.New()), []string{"packageId"}},
		{"missing package", map[string]any{"targets": []any{map[string]any{"targetKind": "Project", "targetId": uuid.NewString()}}}, []string{"packageId"}},
		{"inactive package", purchaseBody(inactive.ID, "Project", uuid.New()), []string{"packageId"}},
		{"no targets", purchaseBody(project.ID, "Project"), []string{"targets"}},
		{"targets missing", map[string]any{"packageId": project.ID}, []string{"targets"}},
		{"eleven targets", purchaseBody(project.ID, "Project", ids(11)...), []string{"targets"}},
		{"kind not admitted", purchaseBody(project.ID, "Post", uuid.New()), []string{"targets[0].targetKind"}},
		{"unknown target kind", purchaseBody(project.ID, "Banner", uuid.New()), []string{"targets[0].targetKind"}},
		{"nil target id", purchaseBody(project.ID, "Project", uuid.Nil), []string{"targets[0].targetId"}},
		{"same target twice", purchaseBody(project.ID, "Project", dup, uuid.New(), dup), []string{"targets[2]"}},
		{"several at once", map[string]any{"packageId": project.ID, "targets": []any{
			map[string]any{"targetKind": "Post", "targetId": uuid.NewString()},
			map[string]any{"targetKind": "Project", "targetId": uuid.Nil.String()},
		}}, []string{"targets[0].targetKind", "targets[1].targetId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: tt.body,
				header: map[string]string{"Idempotency-Key": uuid.NewString()}})
			require.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
			p := res.problem(t)
			require.ElementsMatch(t, tt.fields, p.fields(), string(res.body))
			require.Equal(t, "https://pin.dev/problems/validation-failed", p.Type)
		})
	}
	b.requireNothingWritten(t)
}

func TestPurchaseTenTargetsIsTheLimit(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	p := b.buy(t, b.tenantToken(t, uuid.New()), pkg.ID, 10)
	require.Len(t, p.Targets, 10)
	require.Len(t, b.events(t)[0].Envelope.Payload.Targets, 10)
}

func TestPurchaseMalformedRequests(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	target := `{"targetKind":"Project","targetId":"` + uuid.NewString() + `"}`

	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"not JSON", `{"packageId":`, http.StatusBadRequest},
		{"empty body", ``, http.StatusBadRequest},
		{"null", `null`, http.StatusBadRequest},
		{"array", `[]`, http.StatusBadRequest},
		{"targets not an array", `{"packageId":"` + pkg.ID + `","targets":"Project"}`, http.StatusBadRequest},
		{"packageId a number", `{"packageId":5,"targets":[` + target + `]}`, http.StatusBadRequest},
		{"packageId not a UUID", `{"packageId":"abc","targets":[` + target + `]}`, http.StatusBadRequest},
		{"targetId not a UUID", `{"packageId":"` + pkg.ID + `","targets":[{"targetKind":"Project","targetId":"x"}]}`, http.StatusBadRequest},
		{"targetKind a number", `{"packageId":"` + pkg.ID + `","targets":[{"targetKind":1,"targetId":"` + uuid.NewString() + `"}]}`, http.StatusBadRequest},
		{"unknown field", `{"packageId":"` + pkg.ID + `","targets":[` + target + `],"extra":1}`, http.StatusBadRequest},
		{"trailing data", `{"packageId":"` + pkg.ID + `","targets":[` + target + `]} {}`, http.StatusBadRequest},
		{"over 64 KiB", `{"packageId":"` + pkg.ID + `","targets":[` + target + `],"pad":"` + strings.Repeat("x", 64<<10) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: tt.body})
			require.Equal(t, tt.status, res.status, string(res.body))
			res.problem(t)
		})
	}
	b.requireNothingWritten(t)
}

func TestPurchaseSnapshotsSurvivePackageEdits(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)

	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t), body: map[string]any{
		"code": "project-boost-week-v2", "boostWeight": 99, "durationDays": 30, "kind": "PostBoost",
		"price": map[string]any{"amount": json.Number("1.99")},
	}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	got := b.do(t, request{method: http.MethodGet, path: purchasePath(bought.ID), token: b.tenantToken(t, tenant)})
	var after purchaseJSON
	got.decode(t, &after)
	require.Equal(t, bought, after, "INV-2: the purchase keeps its snapshots")
	require.Len(t, b.events(t), 1, "editing a package announces nothing about purchases")
}

// The module builds purchases from the packages earlier purchases read
// (ADR-0004, "The package of a purchase"); a change of the package, through
// the API or by hand in the database, is seen by the very next purchase.
func TestPurchaseAfterAPackageChangeCarriesTheChange(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	first := b.buy(t, token, pkg.ID, 1)
	require.Equal(t, 10, first.BoostWeight)

	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t), body: map[string]any{
		"code": "project-boost-month", "boostWeight": 20, "durationDays": 30,
		"price": map[string]any{"amount": json.Number("4990.00")},
	}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	edited := b.buy(t, token, pkg.ID, 1)
	require.Equal(t, "project-boost-month", edited.PackageCode)
	require.Equal(t, 20, edited.BoostWeight)
	require.Equal(t, "4990.00", edited.Price.Amount.String())
	require.Equal(t, 30*24*time.Hour, edited.EndsAt.Sub(edited.StartsAt))

	// An operator's edit that leaves updated_at alone.
	b.exec(t, `UPDATE promotion.promotion_packages SET boost_weight = 30 WHERE id = $1`, pkg.ID)
	require.Equal(t, 30, b.buy(t, token, pkg.ID, 1).BoostWeight)

	res = b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t),
		body: map[string]any{"isActive": false}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res = b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: purchaseBody(pkg.ID, "Project", uuid.New())})
	require.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
	require.Equal(t, []string{"packageId"}, res.problem(t).fields())
	require.Len(t, b.events(t), 3, "one event per purchase, none for the refused one")
}

func TestPurchasesAreTenantScoped(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	owner := uuid.New()
	p := b.buy(t, b.tenantToken(t, owner), pkg.ID, 1)
	stranger := b.tenantToken(t, uuid.New())

	res := b.do(t, request{method: http.MethodGet, path: purchasePath(p.ID), token: stranger})
	require.Equal(t, http.StatusNotFound, res.status)
	require.Equal(t, "https://pin.dev/problems/purchase-not-found", res.problem(t).Type)

	unknown := b.do(t, request{method: http.MethodGet, path: purchasePath(uuid.NewString()), token: stranger})
	require.Equal(t, http.StatusNotFound, unknown.status)
	require.Equal(t, res.problem(t).Title, unknown.problem(t).Title, "another tenant's purchase looks like no purchase")

	res = b.do(t, request{method: http.MethodPost, path: cancelPath(p.ID), token: stranger, body: map[string]any{"reason": "mine now"}})
	require.Equal(t, http.StatusNotFound, res.status)

	list := b.do(t, request{method: http.MethodGet, path: purchasesPath, token: stranger})
	var page purchaseListJSON
	list.decode(t, &page)
	require.Empty(t, page.Items)

	admin := b.adminToken(t)
	res = b.do(t, request{method: http.MethodGet, path: purchasePath(p.ID), token: admin})
	require.Equal(t, http.StatusOK, res.status, "an admin reads any tenant's purchase")
	res = b.do(t, request{method: http.MethodPost, path: cancelPath(p.ID), token: admin, body: map[string]any{"reason": "fraud"}})
	require.Equal(t, http.StatusOK, res.status, "an admin cancels any tenant's purchase")
	var cancelled purchaseJSON
	res.decode(t, &cancelled)
	require.Equal(t, "Cancelled", cancelled.Status)
	require.Equal(t, owner.String(), cancelled.TenantID)
}

func TestMalformedPurchaseIDIsNotFound(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	token := b.tenantToken(t, uuid.New())
	for _, id := range []string{"abc", "{" + uuid.NewString() + "}", strings.ReplaceAll(uuid.NewString(), "-", "")} {
		res := b.do(t, request{method: http.MethodGet, path: purchasePath(id), token: token})
		require.Equal(t, http.StatusNotFound, res.status, id)
		res = b.do(t, request{method: http.MethodPost, path: cancelPath(id), token: token, body: map[string]any{"reason": "x"}})
		require.Equal(t, http.StatusNotFound, res.status, id)
	}
}
