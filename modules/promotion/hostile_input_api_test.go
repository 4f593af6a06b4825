package promotion_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Hostile input (issue 13): what an attacker or an unlucky client sends must
// end in a 4xx that names the field and changes nothing.

func TestNULInFreeTextIsAValidationErrorNamingTheField(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	bought := b.buy(t, b.tenantToken(t, tenant), pkg.ID, 1)
	withName := func(name string) map[string]any {
		body := packageBody("nul-package", "ProjectBoost")
		body["name"] = name
		return body
	}
	tests := []struct {
		name  string
		req   request
		field string
	}{
		{"cancel reason", request{method: http.MethodPost, path: cancelPath(bought.ID), token: b.tenantToken(t, tenant),
			body: `{"reason":"changed\u0000my mind"}`}, "reason"},
		{"package name on create", request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(t),
			body: withName("Boost\u0000week")}, "name"},
		{"package name on patch", request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t),
			body: `{"name":"\u0000"}`}, "name"},
		{"another control character", request{method: http.MethodPatch, path: adminPackagesPath + "/" + pkg.ID, token: b.adminToken(t),
			body: `{"name":"Boost\u001bweek"}`}, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(t, tt.req)
			require.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
			require.Equal(t, []string{tt.field}, res.problem(t).fields())
		})
	}
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_packages"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_packages WHERE name = 'Test project-boost-week'"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Active'"))
	require.Len(t, b.events(t), 1)
}
