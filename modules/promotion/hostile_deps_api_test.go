package promotion_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// Failing dependencies (ADR 0005): a locked table or a database that
// refuses connections must cost a request a bounded time and a 503 with
// Retry-After, and must not take the routes that do not need it down too.

// testAPIPool is postgres.APIPool with fewer connections, so that a test
// can exhaust it cheaply.
var testAPIPool = func() postgres.PoolConfig {
	p := postgres.APIPool
	p.MaxOpenConns = 4
	return p
}()

func TestLockedPurchasesTableLeavesThePackageListAnswering(t *testing.T) {
	t.Parallel()
	logs := &testbed.LogBuffer{}
	b := newWiredBundle(t, wiring{apiPool: &testAPIPool, logs: logs})
	pkg := b.createPackage(t, "project-boost-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())

	// An operator's LOCK TABLE, held for the whole test.
	locker, err := b.db.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = locker.Rollback() })
	_, err = locker.Exec(`LOCK TABLE promotion.promotion_purchases`)
	require.NoError(t, err)

	// Twice as many purchases as the API has connections: without a bound
	// they would hold every connection for as long as the lock lasts.
	n := 2 * testAPIPool.MaxOpenConns
	type outcome struct {
		served  served
		elapsed time.Duration
	}
	outcomes := make(chan outcome, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			s := b.doOffTest(request{method: http.MethodPost, path: purchasesPath, token: token,
				body: purchaseBody(pkg.ID, "Project", uuid.New())})
			outcomes <- outcome{s, time.Since(start)}
		})
	}
	b.db.WaitForLockWaiters(t, testAPIPool.MaxOpenConns) // every API connection waits on the lock

	listed := make(chan served, 1)
	go func() { listed <- b.doOffTest(request{method: http.MethodGet, path: packagesPath, token: token}) }()
	select {
	case s := <-listed:
		res := s.check(t)
		require.Equal(t, http.StatusOK, res.status, "the package list does not touch the locked table: %s", res.body)
	case <-time.After(httpserver.DefaultHandlerTimeout + 5*time.Second):
		t.Fatal("the package list did not answer while promotion_purchases was locked")
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(httpserver.DefaultHandlerTimeout + 5*time.Second):
		t.Fatal("purchases still waiting on the locked table")
	}
	close(outcomes)
	for o := range outcomes {
		res := o.served.check(t)
		require.Equal(t, http.StatusServiceUnavailable, res.status, string(res.body))
		require.Equal(t, "https://pin.dev/problems/service-unavailable", res.problem(t).Type)
		retry, err := strconv.Atoi(res.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After is a number of seconds")
		require.Positive(t, retry)
		require.Less(t, o.elapsed, httpserver.DefaultHandlerTimeout, "within the request's bound")
	}
	require.NoError(t, locker.Rollback())
	b.requireNothingWritten(t)
	require.Len(t, logs.Records(t, "http: dependency unavailable"), 1, "one line for the burst, not one per request")
	require.Empty(t, failedStatements(t, logs), "GORM does not log the timeouts a second time")
}

func TestDatabaseRefusingConnectionsIs503AndNotReady(t *testing.T) {
	t.Parallel()
	logs := &testbed.LogBuffer{}
	b := newWiredBundle(t, wiring{apiPool: &testAPIPool, logs: logs})
	token := b.tenantToken(t, uuid.New())
	apiSQL, err := b.apiDB.DB()
	require.NoError(t, err)
	apiSQL.SetMaxIdleConns(0) // every request connects anew, and meets the refusal
	host.RegisterProbes(b.e, func(ctx context.Context) error { return postgres.Ready(ctx, apiSQL) },
		observability.NewRegistry(), observability.NewLogger(logs, 0))

	// The database stops accepting connections, as during a failover.
	admin, err := sql.Open("pgx", testbed.BaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	_, err = admin.ExecContext(t.Context(), `ALTER DATABASE `+b.db.Name+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), `ALTER DATABASE `+b.db.Name+` ALLOW_CONNECTIONS true`)
	})

	for range 5 {
		res := b.do(t, request{method: http.MethodGet, path: packagesPath, token: token})
		require.Equal(t, http.StatusServiceUnavailable, res.status, string(res.body))
		require.Equal(t, "https://pin.dev/problems/service-unavailable", res.problem(t).Type)
		require.NotEmpty(t, res.header.Get("Retry-After"))
		require.NotContains(t, string(res.body), b.db.Name, "the cause stays in the log")
	}
	require.Len(t, logs.Records(t, "http: dependency unavailable"), 1, "logged once per interval, not per request")
	require.Empty(t, failedStatements(t, logs))
	require.Empty(t, logs.Records(t, "http: internal error"))

	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), postgres.ReasonUnreachable)
}

// failedStatements are GORM's log lines of statements that failed (slow
// ones, which waiting for a connection can make, are not failures).
func failedStatements(tb testing.TB, logs *testbed.LogBuffer) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, rec := range logs.Records(tb, "SQL executed") {
		if trace, ok := rec["trace"].(map[string]any); ok && trace["error"] != nil {
			out = append(out, rec)
		}
	}
	return out
}
