package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestDevMakeDueManyAtOnce: a team made 200 purchases due one
// `pin dev make-due` at a time, in 75 s. One command now takes them all by
// id, every Active one of a tenant (--tenant), or every Active one
// (--all-active), in one transaction that keeps each period's length; a
// named purchase that is not Active and still to end changes nothing and
// is named. One cycle of the job then expires them all.
func TestDevMakeDueManyAtOnce(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	teamA := purchasesThroughAPI(t, db, 200)
	teamB := purchasesThroughAPI(t, db, 3)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	var tenantB string
	require.NoError(t, db.SQL.QueryRow(`SELECT tenant_id FROM promotion.promotion_purchases WHERE id = $1`, teamB[0]).Scan(&tenantB))
	periods := func() map[string]int64 {
		rows, err := db.SQL.Query(`SELECT id, extract(epoch FROM ends_at - starts_at)::bigint FROM promotion.promotion_purchases`)
		require.NoError(t, err)
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var id string
			var s int64
			require.NoError(t, rows.Scan(&id, &s))
			m[id] = s
		}
		require.NoError(t, rows.Err())
		return m
	}
	before := periods()
	due := func() map[string]bool {
		rows, err := db.SQL.Query(`SELECT id FROM promotion.promotion_purchases WHERE status = 'Active' AND ends_at < now()`)
		require.NoError(t, err)
		defer rows.Close()
		m := map[string]bool{}
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			m[id] = true
		}
		require.NoError(t, rows.Err())
		return m
	}
	requireDue := func(want ...[]string) {
		t.Helper()
		all := map[string]bool{}
		for _, ids := range want {
			for _, id := range ids {
				all[id] = true
			}
		}
		require.Equal(t, all, due())
	}

	// Bad command lines change nothing.
	for _, args := range [][]string{
		{},
		{teamA[0], "--all-active"},
		{"not-a-uuid"},
		{"--tenant", "not-a-uuid"},
	} {
		_, stderr, code := run(t, env, append([]string{"dev", "make-due"}, args...)...)
		require.Equal(t, 2, code, "make-due %v: %s", args, stderr)
	}
	// A purchase of another tenant, or an unknown one, fails the whole command.
	unknown := uuid.NewString()
	_, stderr, code := run(t, env, "dev", "make-due", teamA[0], unknown, teamB[0], "--tenant", tenantB)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "nothing changed")
	require.Contains(t, stderr, teamA[0]+", "+unknown)
	require.NotContains(t, stderr, teamB[0])
	requireDue()

	out, stderr, code := run(t, env, append([]string{"dev", "make-due"}, teamA[:150]...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "150 purchase(s) due")
	require.Equal(t, 151, strings.Count(out, "\n"), "a line a purchase and the count")
	requireDue(teamA[:150])

	out, stderr, code = run(t, env, "dev", "make-due", "--tenant", tenantB)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "3 purchase(s) due")
	requireDue(teamA[:150], teamB)

	out, stderr, code = run(t, env, "dev", "make-due", "--all-active")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "50 purchase(s) due")
	requireDue(teamA, teamB)
	require.Equal(t, before, periods(), "each period keeps its length")

	out, stderr, code = run(t, env, "dev", "make-due", "--all-active")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "nothing made due")

	code, stderr, res := expireOnce(t, db, "1000")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, len(teamA)+len(teamB), res.Expired, fmt.Sprintf("%+v", res))
}
