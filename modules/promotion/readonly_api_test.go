package promotion_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// A read-only primary (ADR 0021): writes are 503 with Retry-After (not
// 500), the episode is one log line and a counter, /readyz is 503
// database_read_only, and once a writable primary is reached the API
// writes again without a restart.

type readOnlyBundle struct {
	*testBundle
	logs *testbed.LogBuffer
	reg  *prometheus.Registry
	pool postgres.PoolConfig
	buy  func() served
	// packageID and token make a purchase (buy).
	packageID, token string
}

// newReadOnlyBundle wires the API on a pool of its own, its sessions
// behind apiHost when not nil, with /readyz on that pool.
func newReadOnlyBundle(t *testing.T, apiHost *testbed.DatabaseHost) *readOnlyBundle {
	t.Helper()
	return newReadOnlyBundleWired(t, wiring{apiHost: apiHost})
}

// newReadOnlyBundleWired is newReadOnlyBundle with the API pool's URL
// chosen by w (apiHost or apiURL).
func newReadOnlyBundleWired(t *testing.T, w wiring) *readOnlyBundle {
	t.Helper()
	rb := &readOnlyBundle{logs: &testbed.LogBuffer{}, reg: prometheus.NewRegistry(), pool: testAPIPool}
	if w.apiPool != nil {
		rb.pool = *w.apiPool
	}
	rb.pool.ReadOnly = postgres.NewReadOnlyWatch(observability.NewLogger(rb.logs, 0), rb.reg)
	w.apiPool, w.logs = &rb.pool, rb.logs
	rb.testBundle = newWiredBundle(t, w)
	apiSQL, err := rb.apiDB.DB()
	require.NoError(t, err)
	host.RegisterProbes(rb.e, func(ctx context.Context) error { return postgres.Ready(ctx, apiSQL) },
		observability.NewRegistry(), observability.NewLogger(rb.logs, 0))
	pkg := rb.createPackage(t, "project-boost-week", "ProjectBoost")
	rb.packageID, rb.token = pkg.ID, rb.tenantToken(t, uuid.New())
	rb.buy = func() served {
		return rb.doOffTest(request{method: http.MethodPost, path: purchasesPath, token: rb.token,
			body: purchaseBody(rb.packageID, "Project", uuid.New())})
	}
	require.Equal(t, http.StatusCreated, rb.buy().check(t).status)
	return rb
}

// buyUnderLoad sends four purchases per API connection at once and
// returns their answers.
func (rb *readOnlyBundle) buyUnderLoad(t *testing.T) []response {
	t.Helper()
	n := 4 * rb.pool.MaxOpenConns
	outcomes := make(chan served, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { outcomes <- rb.buy() })
	}
	wg.Wait()
	close(outcomes)
	var out []response
	for s := range outcomes {
		out = append(out, s.check(t))
	}
	return out
}

// requireUnavailable checks that res is a 503 problem of type slug with a
// Retry-After.
func requireUnavailable(t *testing.T, res response, slug string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, res.status, string(res.body))
	require.Equal(t, "https://pin.dev/problems/"+slug, res.problem(t).Type)
	require.Equal(t, "application/problem+json", res.header.Get("Content-Type"))
	retry, err := strconv.Atoi(res.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is a number of seconds")
	require.Positive(t, retry)
}

// readyz is /readyz's status and body.
func (rb *readOnlyBundle) readyz() (int, string) {
	rec := httptest.NewRecorder()
	rb.e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// requireRecovers waits for a purchase to be created and /readyz to say
// ready (each probe drops a session it finds read-only, until none is
// left), then for the episode's end line.
func (rb *readOnlyBundle) requireRecovers(t *testing.T) {
	t.Helper()
	testbed.Eventually(t, func() error {
		if res := rb.buy().check(t); res.status != http.StatusCreated {
			return fmt.Errorf("purchase: %d %s", res.status, res.body)
		}
		return nil
	})
	testbed.Eventually(t, func() error {
		if code, body := rb.readyz(); code != http.StatusOK {
			return fmt.Errorf("readyz: %d %s", code, body)
		}
		return nil
	})
	require.Len(t, rb.logs.Records(t, "postgres: the database accepts writes again"), 1)
	require.Len(t, rb.logs.Records(t, "postgres: the database refuses writes"), 1, "one episode, one line")
	require.Empty(t, rb.logs.Records(t, "http: internal error"))
	require.Empty(t, failedStatements(t, rb.logs), "GORM leaves the refusals to the caller")
}

func (rb *readOnlyBundle) refusals(t *testing.T) float64 {
	t.Helper()
	return testbed.Metric(t, rb.reg, "pin_database_read_only_refusals_total").GetCounter().GetValue()
}

// TestReadOnlyPrimaryIs503LoggedOnceAndNotReady: the primary is demoted
// under load with the API's sessions left on it (URL with
// target_session_attrs=read-write).
func TestReadOnlyPrimaryIs503LoggedOnceAndNotReady(t *testing.T) {
	t.Parallel()
	primary := testbed.StartDatabaseHost(t)
	rb := newReadOnlyBundle(t, primary)

	primary.SetReadOnly(true)
	answers := rb.buyUnderLoad(t)
	for _, res := range answers {
		requireUnavailable(t, res, "database-read-only")
	}
	require.Empty(t, rb.logs.Records(t, "http: dependency unavailable"), "the pool names the episode, not every request")
	require.GreaterOrEqual(t, rb.refusals(t), float64(len(answers)), "every refused write is counted")
	code, body := rb.readyz()
	require.Equal(t, http.StatusServiceUnavailable, code, "a load balancer stops sending writes here")
	require.Contains(t, body, postgres.ReasonReadOnly)

	primary.SetReadOnly(false)
	rb.requireRecovers(t)
}

// TestReadOnlyDatabaseUnderLoadOnTheDefaultURL: the test's database is
// made read-only as a primary is fenced (default_transaction_read_only,
// its sessions ended), on a URL of one host without target_session_attrs.
// The writes that meet an ended session are 503 service-unavailable, every
// other one 503 database-read-only; none is 500.
func TestReadOnlyDatabaseUnderLoadOnTheDefaultURL(t *testing.T) {
	t.Parallel()
	rb := newReadOnlyBundle(t, nil)
	rb.db.Fence(t, true)
	readOnly := 0
	for _, res := range rb.buyUnderLoad(t) {
		if res.problem(t).Type == "https://pin.dev/problems/service-unavailable" {
			requireUnavailable(t, res, "service-unavailable") // a session ended under it
			continue
		}
		requireUnavailable(t, res, "database-read-only")
		readOnly++
	}
	require.Positive(t, readOnly)
	for range 4 { // the ended sessions are gone by now
		requireUnavailable(t, rb.buy().check(t), "database-read-only")
	}
	require.GreaterOrEqual(t, rb.refusals(t), float64(readOnly+4))
	testbed.Eventually(t, func() error {
		if code, body := rb.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, postgres.ReasonReadOnly) {
			return fmt.Errorf("readyz: %d %s", code, body)
		}
		return nil
	})

	rb.db.Fence(t, false)
	rb.requireRecovers(t)
}
