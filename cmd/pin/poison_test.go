package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestPromotionPoisonListAndRelease: two purchases without targets, made
// due, are poison after one cycle and listed by `pin promotion poison
// list`; bad command lines exit 2 and releasing an unlisted id exits 1 with
// nothing released. One is repaired (its targets put back) and released:
// it is no longer listed, a second release of it exits 1, and the next
// cycle expires it while the other is retried and stays poison, until
// --all releases it too.
func TestPromotionPoisonListAndRelease(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	ids := purchasesThroughAPI(t, db, 2)
	repaired, still := ids[0], ids[1]
	type target struct {
		kind, id string
		position int
	}
	var targets []target
	rows, err := db.SQL.Query(`SELECT target_kind, target_id, position FROM promotion.promotion_purchase_targets
		WHERE purchase_id = $1 ORDER BY position`, repaired)
	require.NoError(t, err)
	for rows.Next() {
		var tg target
		require.NoError(t, rows.Scan(&tg.kind, &tg.id, &tg.position))
		targets = append(targets, tg)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.NotEmpty(t, targets)
	all := "{" + strings.Join(ids, ",") + "}"
	_, err = db.SQL.Exec(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = ANY($1::uuid[])`, all)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'
		WHERE id = ANY($1::uuid[])`, all)
	require.NoError(t, err)

	code, stderr, res := expireOnce(t, db, "200")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 2, res.Failed, "%+v", res)

	listed := func() map[string]map[string]any {
		t.Helper()
		out, stderr, code := run(t, env, "promotion", "poison", "list")
		require.Equal(t, 0, code, stderr)
		got := map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			var p map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &p), "one JSON object a line: %s", out)
			got[p["purchaseId"].(string)] = p
		}
		return got
	}
	poison := listed()
	require.Len(t, poison, 2)
	for _, id := range ids {
		p := poison[id]
		require.NotNil(t, p, "%s is listed", id)
		require.EqualValues(t, 1, p["attempts"])
		require.Contains(t, p["lastError"], "target")
		require.Equal(t, "Active", p["status"])
		for _, field := range []string{"tenantId", "firstFailedAt", "lastAttemptAt"} {
			require.NotEmpty(t, p[field], field)
		}
	}

	for _, args := range [][]string{
		{"promotion"}, {"promotion", "poison"}, {"promotion", "poison", "purge"}, {"promotion", "poison", "list", "extra"},
		{"promotion", "poison", "release"}, {"promotion", "poison", "release", "not-a-uuid"},
		{"promotion", "poison", "release", "--all", repaired},
	} {
		_, stderr, code := run(t, env, args...)
		require.Equal(t, 2, code, "pin %v: %s", args, stderr)
	}
	unknown := uuid.NewString()
	_, stderr, code = run(t, env, "promotion", "poison", "release", repaired, unknown)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, unknown)
	require.Len(t, listed(), 2, "all or nothing: nothing released")

	for _, tg := range targets {
		_, err := db.SQL.Exec(`INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
			VALUES ($1, $2, $3, $4)`, repaired, tg.kind, tg.id, tg.position)
		require.NoError(t, err)
	}
	out, stderr, code := run(t, env, "promotion", "poison", "release", repaired)
	require.Equal(t, 0, code, stderr)
	var released map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &released), out)
	require.Equal(t, repaired, released["purchaseId"])
	poison = listed()
	require.Len(t, poison, 1)
	require.Contains(t, poison, still, "the released one is no longer listed")
	_, stderr, code = run(t, env, "promotion", "poison", "release", repaired)
	require.Equal(t, 1, code, "a second release: %s", stderr)

	code, stderr, res = expireOnce(t, db, "200")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 1, res.Expired, "the repaired one expires in the next cycle: %+v", res)
	require.Equal(t, 1, res.Failed, "the other is retried and fails again: %+v", res)
	var status string
	require.NoError(t, db.SQL.QueryRow(`SELECT status FROM promotion.promotion_purchases WHERE id = $1`, repaired).Scan(&status))
	require.Equal(t, "Expired", status)
	poison = listed()
	require.Len(t, poison, 1)
	require.EqualValues(t, 2, poison[still]["attempts"])

	out, stderr, code = run(t, env, "promotion", "poison", "release", "--all")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, still)
	require.Empty(t, listed(), "--all releases every one")
	out, stderr, code = run(t, env, "promotion", "poison", "list")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out, "stdout stays clean for scripts")
	require.Equal(t, "no poison purchases\n", stderr, "an empty list says so")
	out, stderr, code = run(t, env, "promotion", "poison", "release", "--all")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out)
	require.Equal(t, "no poison purchases to release\n", stderr)
}
