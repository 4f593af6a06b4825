package promotion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// Fast, cheap refusals during an outage (ADR 0031): under a steady load of
// purchases through the real HTTP server, while no host takes writes every
// purchase is answered 503 with Retry-After well inside outageP99, the API
// opens a few sessions a second at most rather than one per request, and
// once a writable primary is back purchases are created again, none that
// was acknowledged lost. The figures are logged for docs/performance.md.

const (
	outageRate     = 40 // purchases a second
	outageHealthy  = time.Second
	outageLength   = 3 * time.Second
	outageRecovery = time.Second // of load after the first purchase created again
	outageP99      = 100 * time.Millisecond
	// outageSessionsPerSecond bounds the API's new sessions while the
	// outage lasts; one per request would be outageRate.
	outageSessionsPerSecond = 5.0
)

// TestReadOnlyPrimaryUnderLoadIsRefusedFastAndCheaply: the one host of the
// default URL (no target_session_attrs) turns read-only with the API's
// sessions on it, then writable again.
func TestReadOnlyPrimaryUnderLoadIsRefusedFastAndCheaply(t *testing.T) {
	t.Parallel()
	primary := testbed.StartDatabaseHost(t)
	rb := newOutageBundle(t, func(dbURL string) string {
		return testbed.HostListURL(t, dbURL, []string{primary.Addr()}, nil)
	})
	run := rb.underLoad(t, []*testbed.DatabaseHost{primary},
		func() { primary.SetReadOnly(true) },
		func() { primary.SetReadOnly(false) })
	run.require(t, rb, "read-only primary")
}

// TestFailoverUnderLoadIsRefusedFastAndCheaply: the URL lists a primary and
// a standby (target_session_attrs=read-write); the primary stops, its
// sessions closed and its port refusing, and the standby is promoted after
// outageLength.
func TestFailoverUnderLoadIsRefusedFastAndCheaply(t *testing.T) {
	t.Parallel()
	primary, standby := testbed.StartDatabaseHost(t), testbed.StartDatabaseHost(t)
	standby.SetReadOnly(true)
	rb := newOutageBundle(t, func(dbURL string) string {
		return testbed.HostListURL(t, dbURL, []string{primary.Addr(), standby.Addr()},
			url.Values{"target_session_attrs": {"read-write"}})
	})
	run := rb.underLoad(t, []*testbed.DatabaseHost{primary, standby},
		primary.Stop,
		func() { standby.SetReadOnly(false) })
	run.require(t, rb, "failover")
}

// newOutageBundle wires the API on a pool of `pin serve`'s size whose URL
// apiURL makes from the test database's.
func newOutageBundle(t *testing.T, apiURL func(dbURL string) string) *readOnlyBundle {
	t.Helper()
	pool := postgres.APIPool
	return newReadOnlyBundleWired(t, wiring{apiPool: &pool, apiURL: apiURL})
}

// outcome is one purchase's answer under load.
type outcome struct {
	start   time.Time
	latency time.Duration
	status  int
	problem string
	// retryAfter is the Retry-After header of a 503.
	retryAfter string
	// id is the purchase a 201 acknowledged.
	id  string
	err error
}

// outageRun is what a load through an outage saw.
type outageRun struct {
	outcomes         []outcome
	from, to         time.Time // the outage: begun, ended
	recovered        time.Time // the first purchase created after it
	sessionsInOutage int64
}

// underLoad serves the API on a real listener, sends outageRate purchases
// a second, and begins the outage after outageHealthy and ends it
// outageLength later; it stops the load outageRecovery after the first
// purchase created since. hosts are counted for the sessions the outage
// cost.
func (rb *readOnlyBundle) underLoad(t *testing.T, hosts []*testbed.DatabaseHost, begin, end func()) outageRun {
	t.Helper()
	base := serveOnListener(t, rb.e)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * outageRate}}
	t.Cleanup(client.CloseIdleConnections)
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second / outageRate)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				wg.Go(func() {
					o := rb.purchaseOver(client, base)
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				})
			}
		}
	}()
	sessions := func() (n int64) {
		for _, h := range hosts {
			n += h.Sessions()
		}
		return n
	}

	var run outageRun
	time.Sleep(outageHealthy) // the load's healthy phase, not a wait for a condition
	before := sessions()
	begin()
	run.from = time.Now()
	time.Sleep(outageLength) // the outage lasts this long under load
	run.sessionsInOutage = sessions() - before
	run.to = time.Now()
	end()
	testbed.Eventually(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outcomes {
			if o.start.After(run.to) && o.status == http.StatusCreated {
				run.recovered = o.start
				return nil
			}
		}
		return errors.New("no purchase created since the outage ended")
	})
	time.Sleep(outageRecovery) // load after the recovery
	close(stop)
	<-stopped
	wg.Wait()
	slices.SortFunc(outcomes, func(a, b outcome) int { return a.start.Compare(b.start) })
	run.outcomes = outcomes
	return run
}

// serveOnListener serves e through httpserver.ServeListener on a local
// port until the test ends, and returns its base URL.
func serveOnListener(t *testing.T, e *echo.Echo) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpserver.ServeListener(ctx, ln, e, httpserver.Config{}, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
	})
	return "http://" + ln.Addr().String()
}

// purchaseOver makes one purchase through client.
func (rb *readOnlyBundle) purchaseOver(client *http.Client, base string) outcome {
	o := outcome{start: time.Now()}
	body, err := json.Marshal(purchaseBody(rb.packageID, "Project", uuid.New()))
	if err != nil {
		o.err = err
		return o
	}
	req, err := http.NewRequest(http.MethodPost, base+purchasesPath, bytes.NewReader(body))
	if err != nil {
		o.err = err
		return o
	}
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set(echo.HeaderAuthorization, "Bearer "+rb.token)
	res, err := client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	o.latency, o.status, o.err = time.Since(o.start), res.StatusCode, err
	var answer struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if o.err == nil {
		o.err = json.Unmarshal(raw, &answer)
	}
	o.id, o.problem, o.retryAfter = answer.ID, answer.Type, res.Header.Get("Retry-After")
	return o
}

// require checks the run, and logs its figures under name.
func (run outageRun) require(t *testing.T, rb *readOnlyBundle, name string) {
	t.Helper()
	var refused []time.Duration
	var acknowledged []string
	for _, o := range run.outcomes {
		switch {
		case o.status == http.StatusCreated:
			acknowledged = append(acknowledged, o.id)
		case !o.start.Before(run.from) && o.start.Before(run.to):
			refused = append(refused, o.latency)
		}
	}
	slices.Sort(refused)
	p50, p99 := percentile(refused, 0.5), percentile(refused, 0.99)
	outage := run.to.Sub(run.from)
	perSecond := float64(run.sessionsInOutage) / outage.Seconds()
	t.Logf("%s: %d purchases in %s of outage, 503 p50 %s p99 %s max %s; %d new sessions (%.1f/s); writes again %s after it ended; %d created in all",
		name, len(refused), outage.Round(time.Millisecond), p50, p99, percentile(refused, 1),
		run.sessionsInOutage, perSecond, run.recovered.Sub(run.to).Round(time.Millisecond), len(acknowledged))

	inOutage := 0
	for _, o := range run.outcomes {
		require.NoError(t, o.err, "every purchase is answered within the client's timeout")
		require.Contains(t, []int{http.StatusCreated, http.StatusServiceUnavailable}, o.status, "%+v", o)
		if !o.start.Before(run.from) && o.start.Before(run.to) {
			inOutage++
			require.Equal(t, http.StatusServiceUnavailable, o.status, "no write is taken while no host takes writes: %+v", o)
		}
		if o.status == http.StatusServiceUnavailable {
			require.Contains(t, []string{"https://pin.dev/problems/database-read-only", "https://pin.dev/problems/service-unavailable"},
				o.problem, "%+v", o)
			require.NotEmpty(t, o.retryAfter, "a 503 says when to come back: %+v", o)
			require.False(t, o.start.After(run.recovered), "once a purchase is created again, every later one is: %+v", o)
		}
	}
	require.Greater(t, inOutage, int(0.8*outageRate*outageLength.Seconds()), "the load kept its rate through the outage")
	require.Less(t, p99, outageP99, "the 503s' p99")
	require.LessOrEqual(t, perSecond, outageSessionsPerSecond, "new sessions a second during the outage, not one per request")

	var found int
	require.NoError(t, rb.db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases WHERE id = ANY($1::uuid[])`,
		acknowledged).Scan(&found))
	require.Equal(t, len(acknowledged), found, "every acknowledged purchase is stored")
	require.Len(t, rb.logs.Records(t, "postgres: the database refuses writes"), 1, "one episode, one line")
	require.Len(t, rb.logs.Records(t, "postgres: the database accepts writes again"), 1)
	require.Empty(t, rb.logs.Records(t, "http: internal error"))
}

// percentile is the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, int(math.Ceil(q*float64(len(sorted))))-1)]
}
