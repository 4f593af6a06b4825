package promotion_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// TestReadOnlyPrimaryIs503LoggedOnceAndNotReady (ADR 0021): the primary
// is demoted under load with the API's sessions left on it. Every write is
// 503 database-read-only with Retry-After (not 500), the episode is one log
// line and a counter, /readyz is 503 database_read_only; once the host
// takes writes again the API writes without a restart.
func TestReadOnlyPrimaryIs503LoggedOnceAndNotReady(t *testing.T) {
	t.Parallel()
	logs := &testbed.LogBuffer{}
	reg := prometheus.NewRegistry()
	pool := testAPIPool
	pool.ReadOnly = postgres.NewReadOnlyWatch(observability.NewLogger(logs, 0), reg)
	primary := testbed.StartDatabaseHost(t)
	b := newWiredBundle(t, wiring{apiPool: &pool, apiHost: primary, logs: logs})
	apiSQL, err := b.apiDB.DB()
	require.NoError(t, err)
	host.RegisterProbes(b.e, func(ctx context.Context) error { return postgres.Ready(ctx, apiSQL) },
		observability.NewRegistry(), observability.NewLogger(logs, 0))
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	buy := func() served {
		return b.doOffTest(request{method: http.MethodPost, path: purchasesPath, token: token,
			body: purchaseBody(pkg.ID, "Project", uuid.New())})
	}
	require.Equal(t, http.StatusCreated, buy().check(t).status)

	primary.SetReadOnly(true)
	n := 4 * pool.MaxOpenConns
	outcomes := make(chan served, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { outcomes <- buy() })
	}
	wg.Wait()
	close(outcomes)
	for s := range outcomes {
		res := s.check(t)
		require.Equal(t, http.StatusServiceUnavailable, res.status, string(res.body))
		require.Equal(t, "https://pin.dev/problems/database-read-only", res.problem(t).Type)
		require.Equal(t, "application/problem+json", res.header.Get("Content-Type"))
		retry, err := strconv.Atoi(res.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After is a number of seconds")
		require.Positive(t, retry)
	}
	require.Empty(t, logs.Records(t, "http: internal error"))
	require.Empty(t, logs.Records(t, "http: dependency unavailable"), "the pool names the episode, not every request")
	require.Empty(t, failedStatements(t, logs))
	require.Len(t, logs.Records(t, "postgres: the database refuses writes"), 1)
	refused := testbed.Metric(t, reg, "pin_database_read_only_refusals_total").GetCounter().GetValue()
	require.GreaterOrEqual(t, refused, float64(n), "every refused write is counted")

	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a load balancer stops sending writes here")
	require.Contains(t, rec.Body.String(), postgres.ReasonReadOnly)

	primary.SetReadOnly(false)
	testbed.Eventually(t, func() error {
		if res := buy().check(t); res.status != http.StatusCreated {
			return fmt.Errorf("purchase: %d %s", res.status, res.body)
		}
		return nil
	})
	// Each probe drops a session it finds read-only, until none is left.
	testbed.Eventually(t, func() error {
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("readyz: %d %s", rec.Code, rec.Body)
		}
		return nil
	})
	require.Len(t, logs.Records(t, "postgres: the database accepts writes again"), 1)
	require.Len(t, logs.Records(t, "postgres: the database refuses writes"), 1)
}
