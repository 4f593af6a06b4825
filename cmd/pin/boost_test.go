package main_test

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// boostPromise is how soon after the API's answer a target's boost must
// have followed a purchase or a cancellation (docs/consuming-the-event.md).
const boostPromise = 2 * time.Second

// boostOf reads GET /promotion-boosts/{kind}/{id} from s.
func (s *server) boostOf(t *testing.T, tok, kind, id string) (weight, active int) {
	t.Helper()
	code, body := s.do(t, http.MethodGet, "/api/developers/v1/promotion-boosts/"+kind+"/"+id, tok, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, kind, body["targetKind"])
	require.Equal(t, id, body["targetId"])
	return int(body["boostWeight"].(float64)), int(body["activePurchases"].(float64))
}

// requireBoostWithin polls until the target shows weight and active and
// fails when that took longer than within.
func (s *server) requireBoostWithin(t *testing.T, within time.Duration, tok, kind, id string, weight, active int) {
	t.Helper()
	start := time.Now()
	for {
		w, a := s.boostOf(t, tok, kind, id)
		if w == weight && a == active {
			t.Logf("boost of %s %s is %d/%d after %s", kind, id, w, a, time.Since(start).Round(time.Millisecond))
			return
		}
		require.Less(t, time.Since(start), within, "boost of %s %s: want %d/%d, have %d/%d", kind, id, weight, active, w, a)
		time.Sleep(10 * time.Millisecond)
	}
}

// purchaseProject buys project-boost-week (weight 10) for one new project
// and returns the purchase id and the project id.
func (s *server) purchaseProject(t *testing.T, tok, packageID string, projects ...string) string {
	t.Helper()
	id, err := s.tryPurchaseProject(tok, packageID, projects...)
	require.NoError(t, err)
	return id
}

// tryPurchaseProject is purchaseProject for a goroutine, which must not
// stop the test.
func (s *server) tryPurchaseProject(tok, packageID string, projects ...string) (string, error) {
	targets := make([]map[string]any, len(projects))
	for i, p := range projects {
		targets[i] = map[string]any{"targetKind": "Project", "targetId": p}
	}
	code, purchase, err := s.send(http.MethodPost, "/api/developers/v1/promotions", tok,
		map[string]any{"packageId": packageID, "targets": targets}, "Idempotency-Key", uuid.NewString())
	if err != nil {
		return "", err
	}
	if code != http.StatusCreated {
		return "", fmt.Errorf("purchase: %d %v", code, purchase)
	}
	return purchase["id"].(string), nil
}

func (s *server) packageID(t *testing.T, tok, code string) string {
	t.Helper()
	status, pkgs := s.do(t, http.MethodGet, "/api/developers/v1/promotion-packages", tok, nil)
	require.Equal(t, http.StatusOK, status)
	for _, item := range pkgs["items"].([]any) {
		if p := item.(map[string]any); p["code"] == code {
			return p["id"].(string)
		}
	}
	t.Fatalf("no package %s", code)
	return ""
}

// TestDevBoostFollowsPurchaseCancelAndExpiry walks the README: in `pin dev`
// a purchase raises its project's boost within 2 s, a cancellation takes it
// away within 2 s, and after `pin dev make-due` an expiry cycle takes away
// the boost of the expired purchase.
func TestDevBoostFollowsPurchaseCancelAndExpiry(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	s := startDev(t, db)
	tok := token(t, uuid.New())
	pkg := s.packageID(t, tok, "project-boost-week")
	project := uuid.NewString()

	// The first event also waits for the consumer group to form.
	first := s.purchaseProject(t, tok, pkg, project)
	s.requireBoostWithin(t, testbed.ForwardDeadline, tok, "Project", project, 10, 1)
	second := s.purchaseProject(t, tok, pkg, project)
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 20, 2)

	code, body := s.do(t, http.MethodPost, "/api/developers/v1/promotions/"+first+"/cancel", tok, map[string]any{"reason": "test"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 10, 1)

	var period time.Duration
	periodOf := `SELECT extract(epoch FROM ends_at - starts_at)::bigint FROM promotion.promotion_purchases WHERE id = $1`
	require.NoError(t, db.SQL.QueryRow(periodOf, second).Scan(&period))
	out, stderr, code := run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "dev", "make-due", second)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "is due")
	var after time.Duration
	require.NoError(t, db.SQL.QueryRow(periodOf, second).Scan(&after))
	require.Equal(t, period, after, "make-due keeps the period's length")
	out, stderr, code = run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "expire-promotions", "--once")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"expired":1`)
	s.requireBoostWithin(t, boostPromise, tok, "Project", project, 0, 0)

	_, pkgs := s.do(t, http.MethodGet, "/api/developers/v1/promotion-boosts/Billboard/"+project, tok, nil)
	require.Equal(t, float64(http.StatusUnprocessableEntity), pkgs["status"])
}

// TestDevMakeDueRefusesADatabasePinDevDidNotCreate runs make-due against a
// migrated database that pin dev never marked, as a production one is.
func TestDevMakeDueRefusesADatabasePinDevDidNotCreate(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	_, stderr, code := run(t, []string{"PIN_DATABASE_URL=" + db.URL}, "dev", "make-due", uuid.NewString())
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "refused")
	require.Contains(t, stderr, "PIN_DATABASE_URL")
	_, stderr, code = run(t, nil, "dev", "make-due", "not-a-uuid")
	require.Equal(t, 2, code, stderr)
}

// TestBoostProjectionSurvivesSIGKILL kills the consuming `pin serve`
// (PIN_BOOST_PROJECTION=on) in the middle of a stream of purchases and
// cancellations taken by another instance, restarts it, and compares the
// projection with the one computed from the promotion tables: nothing lost,
// nothing applied twice.
func TestBoostProjectionSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	env := func(projection string) []string { return serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION="+projection) }
	api := startServer(t, env("off"), "serve")
	consumer := startServer(t, env("on"), "serve")
	tok := token(t, uuid.New())
	admin := token(t, uuid.New(), "admin")
	code, pkg := api.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", admin, map[string]any{
		"code": "crash-test", "name": "crash test", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 3,
		"price": map[string]any{"amount": 10, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", pkg)

	projects := make([]string, 15)
	for i := range projects {
		projects[i] = uuid.NewString()
	}
	const purchases = 240
	var wg sync.WaitGroup
	var traffic error // the writer's, checked on the test's goroutine
	wg.Go(func() {
		for i := range purchases {
			id, err := api.tryPurchaseProject(tok, pkg["id"].(string), projects[i%len(projects)], projects[(i+1+i%7)%len(projects)])
			if err != nil {
				traffic = err
				return
			}
			if i%3 == 0 {
				code, body, err := api.send(http.MethodPost, "/api/developers/v1/promotions/"+id+"/cancel", tok, map[string]any{"reason": "test"})
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("cancel: %d %v", code, body)
				}
				if err != nil {
					traffic = err
					return
				}
			}
		}
	})

	// Kill once the consumer is well into the stream.
	testbed.Eventually(t, func() error {
		var applied int
		require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM consumer.inbox WHERE consumer = 'boost'`).Scan(&applied))
		if applied < 60 {
			return fmt.Errorf("the consumer applied %d of 60 events", applied)
		}
		return nil
	})
	require.NoError(t, consumer.cmd.Process.Signal(syscall.SIGKILL))
	<-consumer.waited
	consumer.waited <- nil // for the cleanup
	wg.Wait()
	require.NoError(t, traffic)

	startServer(t, env("on"), "serve")
	var want, got []string
	testbed.Eventually(t, func() error {
		want, got = queryStrings(t, db, boostFromPurchases), queryStrings(t, db, boostProjected)
		if fmt.Sprint(want) != fmt.Sprint(got) || !appliedEverything(t, db) {
			return fmt.Errorf("projection\n%v\ndiffers from the database\n%v", got, want)
		}
		return nil
	})
	require.Len(t, want, len(projects))
	var events, inbox int
	require.NoError(t, db.SQL.QueryRow(`SELECT sum(version) FROM promotion.promotion_purchases`).Scan(&events))
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM consumer.inbox WHERE consumer = 'boost'`).Scan(&inbox))
	require.Equal(t, events, inbox, "every event taken exactly once")
}

// appliedEverything reports whether the consumer's version of every purchase
// is the purchase's own.
func appliedEverything(t *testing.T, db *testbed.Database) bool {
	t.Helper()
	var behind int
	require.NoError(t, db.SQL.QueryRow(`
		SELECT count(*) FROM promotion.promotion_purchases p
		LEFT JOIN consumer.aggregate_versions v ON v.consumer = 'boost' AND v.aggregate_id = p.id::text
		WHERE v.version IS DISTINCT FROM p.version`).Scan(&behind))
	return behind == 0
}

func queryStrings(t *testing.T, db *testbed.Database, query string, args ...any) []string {
	t.Helper()
	rows, err := db.SQL.Query(query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}
