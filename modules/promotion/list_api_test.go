package promotion_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// listAll pages through the tenant's purchases with the given query and
// returns the ids in the order served.
func (b *testBundle) listAll(tb testing.TB, token string, query url.Values) []string {
	tb.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		res := b.do(tb, request{method: http.MethodGet, path: purchasesPath + "?" + q.Encode(), token: token})
		require.Equal(tb, http.StatusOK, res.status, string(res.body))
		var page purchaseListJSON
		res.decode(tb, &page)
		for _, p := range page.Items {
			ids = append(ids, p.ID)
		}
		if page.NextCursor == nil {
			return ids
		}
		require.NotEmpty(tb, page.Items, "a page with a next cursor has items")
		cursor = *page.NextCursor
	}
	tb.Fatal("paging did not end")
	return nil
}

func TestListPurchasesPaginates(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	tenant := uuid.New()
	token := b.tenantToken(t, tenant)

	var made []purchaseJSON
	for range 23 {
		made = append(made, b.buy(t, token, pkg.ID, 1))
	}
	// Several purchases made in the same microsecond: the order must still
	// be total (ties broken by id).
	b.exec(t, `UPDATE promotion.promotion_purchases SET created_at = '2026-01-01T00:00:00Z' WHERE id = ANY($1)`,
		[]string{made[3].ID, made[7].ID, made[11].ID, made[15].ID})
	// Another tenant's purchases never show.
	b.buy(t, b.tenantToken(t, uuid.New()), pkg.ID, 1)

	var want []string
	rows, err := b.db.SQL.Query(`SELECT id FROM promotion.promotion_purchases WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC`, tenant)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		want = append(want, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, 23)

	for _, limit := range []string{"1", "5", "7", "23", "100"} {
		got := b.listAll(t, token, url.Values{"limit": {limit}})
		require.Equal(t, want, got, "limit %s: every purchase once, newest first", limit)
	}
	require.Equal(t, want, b.listAll(t, token, nil), "default page size")

	// The first page defaults to 20.
	res := b.do(t, request{method: http.MethodGet, path: purchasesPath, token: token})
	var first purchaseListJSON
	res.decode(t, &first)
	require.Len(t, first.Items, 20)
	require.NotNil(t, first.NextCursor)

	// A purchase made while paging shows up on no later page twice and
	// does not shift the pages: keyset, not offset.
	res = b.do(t, request{method: http.MethodGet, path: purchasesPath + "?limit=10", token: token})
	var page1 purchaseListJSON
	res.decode(t, &page1)
	b.buy(t, token, pkg.ID, 1)
	rest := b.listAll(t, token, url.Values{"limit": {"10"}, "cursor": {*page1.NextCursor}})
	var seen []string
	for _, p := range page1.Items {
		seen = append(seen, p.ID)
	}
	require.Equal(t, want, append(seen, rest...))
}

func TestListPurchasesFiltersByStatus(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	var cancelled, active []string
	for i := range 9 {
		p := b.buy(t, token, pkg.ID, 1)
		if i%3 == 0 {
			res := b.do(t, request{method: http.MethodPost, path: cancelPath(p.ID), token: token, body: map[string]any{"reason": "x"}})
			require.Equal(t, http.StatusOK, res.status)
			cancelled = append(cancelled, p.ID)
		} else {
			active = append(active, p.ID)
		}
	}
	slices.Reverse(cancelled)
	slices.Reverse(active)
	require.Equal(t, cancelled, b.listAll(t, token, url.Values{"status": {"Cancelled"}, "limit": {"2"}}))
	require.Equal(t, active, b.listAll(t, token, url.Values{"status": {"Active"}, "limit": {"4"}}))
	require.Empty(t, b.listAll(t, token, url.Values{"status": {"Expired"}}))
}

func TestListPurchasesRejectsBadParameters(t *testing.T) {
	t.Parallel()
	b := newTestBundle(t)
	token := b.tenantToken(t, uuid.New())
	tests := []struct {
		query  string
		fields []string
	}{
		{"limit=0", []string{"limit"}},
		{"limit=101", []string{"limit"}},
		{"limit=-1", []string{"limit"}},
		{"limit=abc", []string{"limit"}},
		{"limit=1.5", []string{"limit"}},
		{"status=active", []string{"status"}},
		{"status=NoSuchStatus", []string{"status"}},
		{"cursor=garbage!", []string{"cursor"}},
		{"cursor=" + url.QueryEscape("MjAyNi0wMS0wMQ"), []string{"cursor"}},
		{"limit=0&status=x&cursor=y", []string{"limit", "status", "cursor"}},
	}
	for _, tt := range tests {
		res := b.do(t, request{method: http.MethodGet, path: purchasesPath + "?" + tt.query, token: token})
		require.Equal(t, http.StatusUnprocessableEntity, res.status, tt.query)
		require.ElementsMatch(t, tt.fields, res.problem(t).fields(), tt.query)
	}
	for _, ok := range []string{"limit=1", "limit=100", "status=Pending", "status=Expired"} {
		res := b.do(t, request{method: http.MethodGet, path: purchasesPath + "?" + ok, token: token})
		require.Equal(t, http.StatusOK, res.status, ok)
	}
}
