package promotion_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Hostile input (ADR 0005): what an attacker or an unlucky client sends must
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

func TestPurchaseBodyErrorsNameTheField(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	target := uuid.NewString()
	tests := []struct {
		name   string
		body   string
		status int
		fields []string
	}{
		{"not a uuid", `{"packageId":"nope","targets":[]}`, http.StatusBadRequest, []string{"packageId"}},
		{"urn uuid", `{"packageId":"urn:uuid:` + pkg.ID + `","targets":[]}`, http.StatusBadRequest, []string{"packageId"}},
		{"hyphen-less target id", `{"packageId":"` + pkg.ID + `","targets":[{"targetKind":"Project","targetId":"` +
			strings.ReplaceAll(target, "-", "") + `"}]}`, http.StatusBadRequest, []string{"targets[0].targetId"}},
		{"empty object", `{}`, http.StatusUnprocessableEntity, []string{"packageId", "targets"}},
		{"duplicate key", `{"packageId":"` + pkg.ID + `","packageId":"` + uuid.NewString() + `","targets":[]}`,
			http.StatusBadRequest, []string{"packageId"}},
		{"key in another case", `{"packageId":"` + pkg.ID + `","PackageId":"` + uuid.NewString() + `","targets":[]}`,
			http.StatusBadRequest, []string{"PackageId"}},
		{"nested duplicate key", `{"packageId":"` + pkg.ID + `","targets":[{"targetKind":"Project","targetId":"` + target +
			`","targetId":"` + uuid.NewString() + `"}]}`, http.StatusBadRequest, []string{"targets[0].targetId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: tt.body})
			require.Equal(t, tt.status, res.status, string(res.body))
			p := res.problem(t)
			require.Equal(t, tt.fields, p.fields())
			if tt.status == http.StatusUnprocessableEntity {
				require.Equal(t, "is required", p.Errors[0].Message, "an absent packageId is missing, not unknown")
			}
			require.NotContains(t, p.Detail, "invalid UUID length", "the detail is ours, not a parser's")
		})
	}
	b.requireNothingWritten(t)

	upper := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token,
		body: `{"packageId":"` + strings.ToUpper(pkg.ID) + `","targets":[{"targetKind":"Project","targetId":"` + strings.ToUpper(target) + `"}]}`})
	require.Equal(t, http.StatusCreated, upper.status, "upper case is the same UUID (RFC 9562), as in paths: %s", upper.body)
	var p purchaseJSON
	upper.decode(t, &p)
	require.Equal(t, target, p.Targets[0].TargetID, "and it is written back in lower case")
}

func TestPurchaseRacingTheDeactivationOfItsPackageIsOrderedByTheLock(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		name := "package read by the purchase"
		if warm {
			name = "package cached by an earlier purchase"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newTestBundle(t)
			pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
			token := b.tenantToken(t, uuid.New())
			before := 0
			if warm {
				b.buy(t, token, pkg.ID, 1)
				before = 1
			}

			// An admin's deactivation, caught between its UPDATE and its COMMIT.
			deactivation, err := b.db.SQL.BeginTx(t.Context(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = deactivation.Rollback() })
			_, err = deactivation.Exec(`UPDATE promotion.promotion_packages SET is_active = false WHERE id = $1`, pkg.ID)
			require.NoError(t, err)

			bought := make(chan served, 1)
			go func() {
				bought <- b.doOffTest(request{method: http.MethodPost, path: purchasesPath, token: token,
					body: purchaseBody(pkg.ID, "Project", uuid.New())})
			}()
			require.Eventually(t, func() bool {
				return len(bought) > 0 || b.count(t, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
			}, 20*time.Second, 10*time.Millisecond)
			select {
			case s := <-bought:
				res := s.check(t)
				t.Fatalf("the purchase did not wait for the deactivation in progress: %d %s", res.status, res.body)
			default:
			}
			require.NoError(t, deactivation.Commit())

			res := (<-bought).check(t)
			require.Equal(t, http.StatusUnprocessableEntity, res.status, "the purchase sees the committed deactivation: %s", res.body)
			require.Equal(t, []string{"packageId"}, res.problem(t).fields())
			require.Equal(t, before, b.count(t, "SELECT count(*) FROM promotion.promotion_purchases"), "nothing written")
			require.Len(t, b.events(t), before)
		})
	}
}

func TestTwoIdempotencyKeysAreRefused(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, uuid.New()),
		body:     purchaseBody(pkg.ID, "Project", uuid.New()),
		repeated: http.Header{"Idempotency-Key": {"first-key", "second-key"}}})
	require.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
	require.Equal(t, []string{"Idempotency-Key"}, res.problem(t).fields())
	b.requireNothingWritten(t)
}

func TestBadPurchaseIDIsNotEchoedTwice(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	junk := strings.Repeat("x", 2000)
	res := b.do(t, request{method: http.MethodGet, path: purchasePath(junk), token: b.tenantToken(t, uuid.New())})
	require.Equal(t, http.StatusNotFound, res.status)
	p := res.problem(t)
	require.NotContains(t, p.Detail, "xxx", "the detail does not repeat the id")
	require.Less(t, len(res.body), 1<<10, "nor does the instance carry it whole")
}
