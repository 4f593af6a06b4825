package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// startDev starts `pin dev` on db, on free ports.
func startDev(t *testing.T, db *testbed.Database, env ...string) *server {
	t.Helper()
	s, _ := startDevWithBroker(t, db, env...)
	return s
}

// startDevWithBroker is startDev that also returns the address of the
// embedded broker, for a test that reads the topic. env adds variables.
func startDevWithBroker(t *testing.T, db *testbed.Database, env ...string) (*server, string) {
	t.Helper()
	kafkaAddr := testbed.FreeAddr(t)
	return startServer(t, append([]string{
		"PIN_DATABASE_URL=" + db.URL,
		"PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
		"PIN_DEV_KAFKA_ADDR=" + kafkaAddr,
		"PIN_AUTH_JWT_SECRET=" + jwtSecret,
	}, env...), "dev"), kafkaAddr
}

// purchasesThroughAPI makes n Active purchases of project-boost-week the
// black-box way, through the HTTP API of a `pin dev` on db, which it stops
// before returning. It returns their ids in order of creation.
func purchasesThroughAPI(t *testing.T, db *testbed.Database, n int) []string {
	t.Helper()
	s := startDev(t, db)
	tok := token(t, uuid.New())
	pkg := s.packageID(t, tok, "project-boost-week")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.purchaseProject(t, tok, pkg, uuid.NewString())
	}
	code, _ := s.stop(t)
	require.Equal(t, 0, code)
	return ids
}

// expireOnceResult is the JSON line `pin expire-promotions --once` prints.
type expireOnceResult struct {
	RunID         string `json:"runId"`
	Expired       int    `json:"expired"`
	SkippedLocked int    `json:"skippedLocked"`
	Failed        int    `json:"failed"`
}

// expireOnce runs `pin expire-promotions --once --batch-size N` on db and
// returns its exit code, its stderr and, on exit 0, its result line.
func expireOnce(t *testing.T, db *testbed.Database, batchSize string) (int, string, expireOnceResult) {
	t.Helper()
	out, stderr, code := run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "expire-promotions", "--once", "--batch-size", batchSize)
	var res expireOnceResult
	if code == 0 {
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &res), out)
	}
	return code, stderr, res
}

// TestExpireOnceDatabaseFaultAndPoisonAtTheHead runs the built binary on
// the two faults the job must tell apart. A database fault (a trigger refusing the
// UPDATE of 30 due purchases with SQLSTATE 42501) is an infrastructure
// error: exit non-zero, nothing expired, nothing remembered as poison; once
// the trigger is dropped, one cycle of batch 100 expires all 30. Then 25
// poison purchases due before 10 healthy ones, with batch 10: no cycle takes
// more than 10 (expired + failed), and the healthy ones expire within
// ⌈25/10⌉+1 = 4 cycles.
func TestExpireOnceDatabaseFaultAndPoisonAtTheHead(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	ids := purchasesThroughAPI(t, db, 65)
	faulty, poison, healthy := ids[:30], ids[30:55], ids[55:]
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.Exec(query, args...)
		require.NoError(t, err)
	}
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, db.SQL.QueryRow(query, args...).Scan(&n))
		return n
	}
	makeDue := func(days int, ids []string) {
		t.Helper()
		exec(`UPDATE promotion.promotion_purchases
			SET starts_at = starts_at - make_interval(days => $1), ends_at = ends_at - make_interval(days => $1)
			WHERE id = ANY($2::uuid[])`, days, "{"+strings.Join(ids, ",")+"}")
	}

	t.Run("a database fault exits non-zero and quarantines nothing", func(t *testing.T) {
		makeDue(30, faulty)
		exec(`CREATE FUNCTION promotion.black_box_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'permission denied for table promotion_purchases' USING ERRCODE = '42501';
END $$`)
		exec(`CREATE TRIGGER black_box_refuse BEFORE UPDATE ON promotion.promotion_purchases
			FOR EACH ROW EXECUTE FUNCTION promotion.black_box_refuse()`)

		code, stderr, _ := expireOnce(t, db, "20")
		require.NotEqual(t, 0, code, "an infrastructure error exits non-zero: %s", stderr)
		require.Contains(t, stderr, "42501")
		require.Equal(t, 30, count(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Active' AND ends_at <= now()`))
		require.Zero(t, count(`SELECT count(*) FROM promotion.expire_poison`), "no purchase is quarantined for it")

		exec(`DROP TRIGGER black_box_refuse ON promotion.promotion_purchases`)
		code, stderr, res := expireOnce(t, db, "100")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, 30, res.Expired, "one cycle expires all 30")
		require.Zero(t, res.Failed)
	})

	t.Run("poison at the head never takes more than the batch", func(t *testing.T) {
		makeDue(31, poison)
		makeDue(30, healthy)
		exec(`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = ANY($1::uuid[])`, "{"+strings.Join(poison, ",")+"}")
		for cycle := 1; cycle <= 4; cycle++ {
			code, stderr, res := expireOnce(t, db, "10")
			require.Equal(t, 0, code, stderr)
			require.LessOrEqual(t, res.Expired+res.Failed, 10, "cycle %d: %+v", cycle, res)
		}
		require.Equal(t, len(healthy), count(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Expired' AND id = ANY($1::uuid[])`,
			"{"+strings.Join(healthy, ",")+"}"), "the healthy ones expire within 4 cycles")
		require.Equal(t, len(poison), count(`SELECT count(*) FROM promotion.expire_poison`))
	})
}
