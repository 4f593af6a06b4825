package promotion_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestCreatePackage(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	res := b.do(t, request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(t), body: map[string]any{
		"code": "post-boost-month", "name": "Пост на месяц", "kind": "PostBoost", "durationDays": 30, "boostWeight": 1000,
		"price": map[string]any{"amount": json.Number("0"), "currencyId": 643},
	}})
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var p packageJSON
	res.decode(t, &p)
	require.Equal(t, adminPackagesPath+"/"+p.ID, res.header.Get("Location"))
	require.Equal(t, "post-boost-month", p.Code)
	require.Equal(t, "Пост на месяц", p.Name)
	require.Equal(t, "PostBoost", p.Kind)
	require.Equal(t, 30, p.DurationDays)
	require.Equal(t, 1000, p.BoostWeight)
	require.Equal(t, json.Number("0.00"), p.Price.Amount, "a free package, written with two decimals")
	require.Equal(t, "RUB", p.Price.Currency.IsoCode)
	require.True(t, p.IsActive, "active unless said otherwise")
	require.Equal(t, p.CreatedAt, p.UpdatedAt)

	dup := b.do(t, request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(t), body: packageBody("post-boost-month", "ProjectBoost")})
	require.Equal(t, http.StatusConflict, dup.status)
	require.Equal(t, "https://pin.dev/problems/package-code-taken", dup.problem(t).Type)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_packages"))
}

func TestCreatePackageValidation(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	with := func(change func(map[string]any)) map[string]any {
		body := packageBody("valid-code", "ProjectBoost")
		change(body)
		return body
	}
	price := func(body map[string]any) map[string]any { return body["price"].(map[string]any) }
	tests := []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"upper-case code", with(func(m map[string]any) { m["code"] = "Project-Boost" }), []string{"code"}},
		{"code with space", with(func(m map[string]any) { m["code"] = "a b" }), []string{"code"}},
		{"code double hyphen", with(func(m map[string]any) { m["code"] = "a--b" }), []string{"code"}},
		{"code trailing hyphen", with(func(m map[string]any) { m["code"] = "a-" }), []string{"code"}},
		{"missing code", with(func(m map[string]any) { delete(m, "code") }), []string{"code"}},
		{"blank name", with(func(m map[string]any) { m["name"] = " " }), []string{"name"}},
		{"unknown kind", with(func(m map[string]any) { m["kind"] = "BannerBoost" }), []string{"kind"}},
		{"zero days", with(func(m map[string]any) { m["durationDays"] = 0 }), []string{"durationDays"}},
		{"366 days", with(func(m map[string]any) { m["durationDays"] = 366 }), []string{"durationDays"}},
		{"zero weight", with(func(m map[string]any) { m["boostWeight"] = 0 }), []string{"boostWeight"}},
		{"weight 1001", with(func(m map[string]any) { m["boostWeight"] = 1001 }), []string{"boostWeight"}},
		{"negative amount", with(func(m map[string]any) { price(m)["amount"] = json.Number("-1") }), []string{"price.amount"}},
		{"three decimals", with(func(m map[string]any) { price(m)["amount"] = json.Number("10.005") }), []string{"price.amount"}},
		{"amount over decimal(14,2)", with(func(m map[string]any) { price(m)["amount"] = json.Number("1000000000000") }), []string{"price.amount"}},
		{"missing amount", with(func(m map[string]any) { delete(price(m), "amount") }), []string{"price.amount"}},
		{"dollars", with(func(m map[string]any) { price(m)["currencyId"] = 840 }), []string{"price.currencyId"}},
		{"missing currency", with(func(m map[string]any) { delete(price(m), "currencyId") }), []string{"price.currencyId"}},
		{"missing price", with(func(m map[string]any) { delete(m, "price") }), []string{"price.amount", "price.currencyId"}},
		{"everything", map[string]any{"price": map[string]any{}},
			[]string{"code", "name", "kind", "durationDays", "boostWeight", "price.amount", "price.currencyId"}},
	}
	for _, tt := range tests {
		res := b.do(t, request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(t), body: tt.body})
		require.Equal(t, http.StatusUnprocessableEntity, res.status, tt.name)
		require.ElementsMatch(t, tt.fields, res.problem(t).fields(), tt.name)
	}
	for name, body := range map[string]string{
		"amount as a string": `{"code":"a","name":"a","kind":"PostBoost","durationDays":1,"boostWeight":1,"price":{"amount":"10.00","currencyId":643}}`,
		"days as a string":   `{"code":"a","name":"a","kind":"PostBoost","durationDays":"7","boostWeight":1,"price":{"amount":10,"currencyId":643}}`,
		"days fractional":    `{"code":"a","name":"a","kind":"PostBoost","durationDays":7.5,"boostWeight":1,"price":{"amount":10,"currencyId":643}}`,
		"unknown field":      `{"code":"a","name":"a","kind":"PostBoost","durationDays":7,"boostWeight":1,"price":{"amount":10,"currencyId":643},"color":"red"}`,
		"malformed":          `{"code":`,
	} {
		res := b.do(t, request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(t), body: body})
		require.Equal(t, http.StatusBadRequest, res.status, name)
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM promotion.promotion_packages"))
}

func TestUpdatePackage(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	admin := b.adminToken(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	other := b.createPackage(t, "project-boost-month", "ProjectBoost")
	path := adminPackagesPath + "/" + pkg.ID

	res := b.do(t, request{method: http.MethodPatch, path: path, token: admin,
		body: map[string]any{"boostWeight": 20, "price": map[string]any{"amount": json.Number("999.90")}}})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var p packageJSON
	res.decode(t, &p)
	require.Equal(t, 20, p.BoostWeight)
	require.Equal(t, json.Number("999.90"), p.Price.Amount)
	require.Equal(t, pkg.Code, p.Code, "untouched fields stay")
	require.Equal(t, pkg.DurationDays, p.DurationDays)
	require.Equal(t, pkg.CreatedAt, p.CreatedAt)
	require.True(t, p.UpdatedAt.After(pkg.UpdatedAt))

	// A bad change is refused whole.
	res = b.do(t, request{method: http.MethodPatch, path: path, token: admin,
		body: map[string]any{"boostWeight": 0, "durationDays": 400, "name": "renamed"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.status)
	require.ElementsMatch(t, []string{"boostWeight", "durationDays"}, res.problem(t).fields())

	res = b.do(t, request{method: http.MethodPatch, path: path, token: admin, body: map[string]any{"code": other.Code}})
	require.Equal(t, http.StatusConflict, res.status)

	res = b.do(t, request{method: http.MethodPatch, path: path, token: admin, body: map[string]any{"boostWieght": 3}})
	require.Equal(t, http.StatusBadRequest, res.status, "a misspelt field is not silently ignored")

	for _, id := range []string{uuid.NewString(), "nope"} {
		res = b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + id, token: admin, body: map[string]any{"boostWeight": 3}})
		require.Equal(t, http.StatusNotFound, res.status)
	}

	// Nothing above changed the package but the first request.
	res = b.do(t, request{method: http.MethodPatch, path: path, token: admin, body: map[string]any{}})
	require.Equal(t, http.StatusOK, res.status)
	var now packageJSON
	res.decode(t, &now)
	require.Equal(t, p, now)
}

func TestListActivePackages(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	token := b.tenantToken(t, uuid.New())
	b.createPackage(t, "post-boost-week", "PostBoost")
	off := b.createPackage(t, "b-retired", "PostBoost")
	b.createPackage(t, "a-project", "ProjectBoost")
	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + off.ID, token: b.adminToken(t), body: map[string]any{"isActive": false}})
	require.Equal(t, http.StatusOK, res.status)

	res = b.do(t, request{method: http.MethodGet, path: packagesPath, token: token})
	require.Equal(t, http.StatusOK, res.status)
	var list struct {
		Items []packageJSON `json:"items"`
	}
	res.decode(t, &list)
	codes := make([]string, len(list.Items))
	for i, p := range list.Items {
		codes[i] = p.Code
	}
	require.Equal(t, []string{"a-project", "post-boost-week"}, codes)
}

func TestListActivePackagesEmpty(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	res := b.do(t, request{method: http.MethodGet, path: packagesPath, token: b.tenantToken(t, uuid.New())})
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"items":[]}`, string(res.body))
}

func TestSeedDemoPackagesIsIdempotent(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	ctx := context.Background()
	require.NoError(t, b.module.SeedDemoPackages(ctx))

	// An admin's edit survives the next seeding.
	var id string
	require.NoError(t, b.db.SQL.QueryRow(`SELECT id FROM promotion.promotion_packages WHERE code = 'post-boost-week'`).Scan(&id))
	res := b.do(t, request{method: http.MethodPatch, path: adminPackagesPath + "/" + id, token: b.adminToken(t), body: map[string]any{"boostWeight": 77}})
	require.Equal(t, http.StatusOK, res.status)
	require.NoError(t, b.module.SeedDemoPackages(ctx))

	res = b.do(t, request{method: http.MethodGet, path: packagesPath, token: b.tenantToken(t, uuid.New())})
	var list struct {
		Items []packageJSON `json:"items"`
	}
	res.decode(t, &list)
	got := map[string]packageJSON{}
	for _, p := range list.Items {
		got[p.Code] = p
	}
	require.Len(t, got, 3)
	require.Equal(t, "ProjectBoost", got["project-boost-week"].Kind)
	require.Equal(t, "PropertyObjectBoost", got["property-object-boost-week"].Kind)
	require.Equal(t, "PostBoost", got["post-boost-week"].Kind)
	require.Equal(t, 77, got["post-boost-week"].BoostWeight)
	for _, p := range got {
		require.Equal(t, 7, p.DurationDays)
		require.Equal(t, 643, p.Price.CurrencyID)
		require.True(t, strings.HasSuffix(string(p.Price.Amount), ".00"))
	}

	// And the demo packages can be bought.
	for code, target := range map[string]string{"project-boost-week": "Project", "property-object-boost-week": "PropertyObject", "post-boost-week": "Post"} {
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, uuid.New()),
			body: purchaseBody(got[code].ID, target, uuid.New())})
		require.Equal(t, http.StatusCreated, res.status, code)
	}
}
