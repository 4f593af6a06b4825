package promotion_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestIdempotencyKeyReturnsTheFirstPurchase(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	body := purchaseBody(pkg.ID, "Project", uuid.New(), uuid.New())
	key := map[string]string{"Idempotency-Key": "order-42"}

	first := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, tenant), body: body, header: key})
	require.Equal(t, http.StatusCreated, first.status, string(first.body))
	var created purchaseJSON
	first.decode(t, &created)

	// Another user of the same tenant repeats it, with the JSON spelled
	// differently (upper-case UUIDs, spacing): the same request.
	respelled := `{ "packageId" : "` + strings.ToUpper(pkg.ID) + `", "targets": [` +
		`{"targetKind":"Project","targetId":"` + strings.ToUpper(body["targets"].([]map[string]any)[0]["targetId"].(string)) + `"},` +
		`{"targetKind":"Project","targetId":"` + body["targets"].([]map[string]any)[1]["targetId"].(string) + `"}]}`
	for _, repeat := range []any{body, respelled} {
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, tenant), body: repeat, header: key})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "true", res.header.Get("Idempotent-Replayed"))
		var again purchaseJSON
		res.decode(t, &again)
		require.Equal(t, created, again)
	}

	other := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, tenant),
		body: purchaseBody(pkg.ID, "Project", uuid.New()), header: key})
	require.Equal(t, http.StatusUnprocessableEntity, other.status)
	require.Equal(t, []string{"Idempotency-Key"}, other.problem(t).fields())

	// The key belongs to the tenant: another tenant's same key is its own.
	foreign := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, uuid.New()), body: body, header: key})
	require.Equal(t, http.StatusCreated, foreign.status)

	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM promotion.promotion_purchases"))
	require.Len(t, b.events(t), 2)
}

func TestIdempotencyKeyUnderConcurrentRetries(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	token := b.tenantToken(t, tenant)
	body := purchaseBody(pkg.ID, "Project", uuid.New())
	key := map[string]string{"Idempotency-Key": uuid.NewString()}

	const n = 8
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		ids      = map[string]int{}
	)
	parallel(n, func(int) {
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token, body: body, header: key})
		var p purchaseJSON
		res.decode(t, &p)
		mu.Lock()
		defer mu.Unlock()
		statuses[res.status]++
		ids[p.ID]++
	})
	require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusOK: n - 1}, statuses)
	require.Len(t, ids, 1, "every retry got the same purchase")
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_purchases"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.idempotency_keys"))
	require.Len(t, b.events(t), 1)
}

func TestIdempotencyKeyConcurrentDifferentBodies(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	key := map[string]string{"Idempotency-Key": uuid.NewString()}

	const n = 6
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	parallel(n, func(int) {
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token,
			body: purchaseBody(pkg.ID, "Project", uuid.New()), header: key})
		mu.Lock()
		defer mu.Unlock()
		statuses[res.status]++
	})
	require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusUnprocessableEntity: n - 1}, statuses)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM promotion.promotion_purchases"))
	require.Len(t, b.events(t), 1)
}

func TestIdempotencyKeyFormat(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	for _, key := range []string{strings.Repeat("k", 256), "has space", "ключ"} {
		res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token,
			body: purchaseBody(pkg.ID, "Project", uuid.New()), header: map[string]string{"Idempotency-Key": key}})
		require.Equal(t, http.StatusUnprocessableEntity, res.status, key)
		require.Equal(t, []string{"Idempotency-Key"}, res.problem(t).fields())
	}
	b.requireNothingWritten(t)
	res := b.do(t, request{method: http.MethodPost, path: purchasesPath, token: token,
		body: purchaseBody(pkg.ID, "Project", uuid.New()), header: map[string]string{"Idempotency-Key": strings.Repeat("k", 255)}})
	require.Equal(t, http.StatusCreated, res.status)
}
