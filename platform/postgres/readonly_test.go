package postgres_test

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// Read-only primary (ADR 0021): a pool that meets a server refusing writes
// names it once, counts it, and finds the writable primary by itself.

type failoverBundle struct {
	testBundle
	primary *testbed.DatabaseHost
	standby *testbed.DatabaseHost
	pool    *sql.DB
	reg     *prometheus.Registry
	logs    *testbed.LogBuffer
	nextID  atomic.Int64
}

// newFailover opens a pool of two connections on a URL that lists a
// writable host and a read-only one, the read-only one first when
// standbyFirst.
func newFailover(t *testing.T, standbyFirst bool) *failoverBundle {
	t.Helper()
	f := &failoverBundle{testBundle: setup(t), primary: testbed.StartDatabaseHost(t), standby: testbed.StartDatabaseHost(t),
		reg: prometheus.NewRegistry(), logs: &testbed.LogBuffer{}}
	f.standby.SetReadOnly(true)
	hosts := []string{f.primary.Addr(), f.standby.Addr()}
	if standbyFirst {
		hosts[0], hosts[1] = hosts[1], hosts[0]
	}
	dbURL := testbed.HostListURL(t, f.db.URL, hosts, url.Values{"target_session_attrs": {"read-write"}})
	logger := slog.New(slog.NewJSONHandler(f.logs, nil))
	gdb, err := postgres.OpenPool(t.Context(), dbURL, postgres.PoolConfig{MaxOpenConns: 2, Logger: logger,
		ReadOnly: postgres.NewReadOnlyWatch(logger, f.reg)})
	require.NoError(t, err)
	f.pool, err = gdb.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.pool.Close() })
	return f
}

// write inserts one row through the pool.
func (f *failoverBundle) write(t *testing.T) error {
	t.Helper()
	_, err := f.pool.ExecContext(t.Context(), `INSERT INTO items (id) VALUES ($1)`, f.nextID.Add(1))
	return err
}

func (f *failoverBundle) refusals(t *testing.T) float64 {
	t.Helper()
	m := testbed.Metric(t, f.reg, "pin_database_read_only_refusals_total")
	require.NotNil(t, m, "the counter is registered")
	return m.GetCounter().GetValue()
}

// TestPoolSkipsAReadOnlyHostListedFirst: with target_session_attrs, a URL
// whose first host is a standby writes through the second.
func TestPoolSkipsAReadOnlyHostListedFirst(t *testing.T) {
	t.Parallel()
	f := newFailover(t, true)
	for range 4 {
		require.NoError(t, f.write(t))
	}
	require.NoError(t, postgres.Ready(t.Context(), f.pool))
}

// TestPoolFindsTheNewPrimaryAfterAFailover: the primary is demoted with
// the pool's sessions left on it, the standby promoted. Writes on the old
// sessions are refused (25006) as transient, each refused session is
// dropped, and the pool writes through the new primary without a restart;
// the episode is logged once when it starts and once when it ends.
func TestPoolFindsTheNewPrimaryAfterAFailover(t *testing.T) {
	t.Parallel()
	f := newFailover(t, false)
	// Both sessions open, on the primary.
	conns := make([]*sql.Conn, 2)
	for i := range conns {
		var err error
		conns[i], err = f.pool.Conn(t.Context())
		require.NoError(t, err)
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.NoError(t, f.write(t))

	f.primary.SetReadOnly(true)
	err := f.write(t)
	require.Error(t, err, "the session left on the demoted primary refuses the write")
	require.True(t, postgres.IsReadOnly(err), "%v", err)
	require.True(t, postgres.IsTransient(err), "a refused write is retried later, not a fault: %v", err)
	require.Equal(t, postgres.ReasonReadOnly, readyReason(t, f.pool), "/readyz says so while nothing writable is listed")

	f.standby.SetReadOnly(false) // promoted
	testbed.Eventually(t, func() error { return f.write(t) })
	require.NoError(t, f.write(t))
	require.NoError(t, postgres.Ready(t.Context(), f.pool))
	require.GreaterOrEqual(t, f.refusals(t), 1.0)
	require.Len(t, f.logs.Records(t, "postgres: the database refuses writes"), 1,
		"one line for the episode, not one per refusal")
	ended := f.logs.Records(t, "postgres: the database accepts writes again")
	require.Len(t, ended, 1)
	require.EqualValues(t, f.refusals(t), ended[0]["refused"])
}

// readyReason is postgres.Ready's reason code, "" when ready.
func readyReason(t *testing.T, db *sql.DB) string {
	t.Helper()
	err := postgres.Ready(t.Context(), db)
	if err == nil {
		return ""
	}
	var notReady *postgres.NotReadyError
	require.True(t, errors.As(err, &notReady), "%v", err)
	return notReady.Reason
}

// TestReadyIsNotReadyWhileTheDatabaseIsReadOnly: the test's database is
// made read-only as a fenced primary is (default_transaction_read_only,
// its sessions ended); a ping still answers, but Ready says
// database_read_only until it takes writes again.
func TestReadyIsNotReadyWhileTheDatabaseIsReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, postgres.Ready(t.Context(), b.db.SQL))

	b.db.Fence(t, true)
	testbed.Eventually(t, func() error {
		if reason := readyReason(t, b.db.SQL); reason != postgres.ReasonReadOnly {
			return fmt.Errorf("ready: %q", reason)
		}
		return nil
	})
	require.NoError(t, b.db.SQL.PingContext(t.Context()), "the server answers; it only refuses writes")

	b.db.Fence(t, false)
	testbed.Eventually(t, func() error { return postgres.Ready(t.Context(), b.db.SQL) })
}

// TestOpenWithNoWritableHostSaysSo: no host of a URL with
// target_session_attrs takes writes, one read-only and one not listening.
// The error says there is no writable database and names each host and
// why, and is still transient and read-only for the callers that ask.
func TestOpenWithNoWritableHostSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	standby := testbed.StartDatabaseHost(t)
	standby.SetReadOnly(true)
	down := testbed.FreeAddr(t)
	dbURL := testbed.HostListURL(t, b.db.URL, []string{standby.Addr(), down}, url.Values{"target_session_attrs": {"read-write"}})

	_, err := postgres.OpenPool(t.Context(), dbURL, postgres.PoolConfig{Logger: slog.New(slog.DiscardHandler)})

	var noWritable *postgres.NoWritableDatabaseError
	require.ErrorAs(t, err, &noWritable)
	require.Len(t, noWritable.Tried, 2)
	require.Equal(t, standby.Addr()+" (127.0.0.1): read-only", noWritable.Tried[0])
	require.Contains(t, noWritable.Tried[1], down+" (127.0.0.1): ")
	require.Contains(t, noWritable.Tried[1], "refused")
	require.NotContains(t, err.Error(), "failed to connect")
	require.True(t, postgres.IsReadOnly(err))
	require.True(t, postgres.IsTransient(err))
}

// openOn opens a pool of n connections on dbURL, watched by f's watch, and
// returns it with the watch.
func (f *failoverBundle) openOn(t *testing.T, dbURL string, n int) (*sql.DB, *postgres.ReadOnlyWatch) {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(f.logs, nil))
	watch := postgres.NewReadOnlyWatch(logger, f.reg)
	gdb, err := postgres.OpenPool(t.Context(), dbURL, postgres.PoolConfig{MaxOpenConns: n, Logger: logger, ReadOnly: watch})
	require.NoError(t, err)
	pool, err := gdb.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = pool.Close() })
	return pool, watch
}

// holdOpen makes the pool open n sessions at once, then gives them back.
func holdOpen(t *testing.T, pool *sql.DB, n int) {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		var err error
		conns[i], err = pool.Conn(t.Context())
		require.NoError(t, err)
		require.NoError(t, conns[i].PingContext(t.Context()))
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// TestWritesAreHeldBackWhileTheDatabaseRefusesThem (ADR 0031): once a
// write is refused, AdmitWrite answers at once with a read-only refusal,
// and however often it is asked, the watch's checks open about a session
// a second; when the host takes writes again, a check lets writes through.
// The URL is the default one: a single host, no target_session_attrs.
func TestWritesAreHeldBackWhileTheDatabaseRefusesThem(t *testing.T) {
	t.Parallel()
	f := &failoverBundle{testBundle: setup(t), primary: testbed.StartDatabaseHost(t), reg: prometheus.NewRegistry(), logs: &testbed.LogBuffer{}}
	pool, watch := f.openOn(t, testbed.HostListURL(t, f.db.URL, []string{f.primary.Addr()}, nil), 2)
	f.pool = pool
	require.NoError(t, watch.AdmitWrite())
	require.NoError(t, f.write(t))

	f.primary.SetReadOnly(true)
	require.True(t, postgres.IsReadOnly(f.write(t)))
	before, start := f.primary.Sessions(), time.Now()
	held := 0
	for time.Since(start) < 2*time.Second { // asked as a busy API would, for two seconds
		err := watch.AdmitWrite()
		require.True(t, postgres.IsReadOnly(err), "%v", err)
		require.True(t, postgres.IsTransient(err), "%v", err)
		held++
		time.Sleep(time.Millisecond)
	}
	opened := f.primary.Sessions() - before
	t.Logf("%d writes held back in %s; %d sessions opened by the checks", held, time.Since(start).Round(time.Millisecond), opened)
	require.LessOrEqual(t, opened, int64(8), "the checks, 50 ms doubling to 1 s, not one per write")
	require.Positive(t, opened, "the watch checks for a writable host")
	require.GreaterOrEqual(t, f.refusals(t), float64(held+1), "every write held back is counted")

	f.primary.SetReadOnly(false)
	f.requireWritesComeBack(t, watch, 4)
}

// requireWritesComeBack waits for watch to admit writes again, then makes
// n writes, each of which must succeed, and checks that the outage was
// one episode.
func (f *failoverBundle) requireWritesComeBack(t *testing.T, watch *postgres.ReadOnlyWatch, n int) {
	t.Helper()
	testbed.Eventually(t, watch.AdmitWrite)
	for range n {
		require.NoError(t, f.write(t))
	}
	require.Len(t, f.logs.Records(t, "postgres: the database refuses writes"), 1)
	require.Len(t, f.logs.Records(t, "postgres: the database accepts writes again"), 1)
}

// TestAWritableOnlyPoolLeavesConnectingToTheChecks (ADR 0031): with
// target_session_attrs=read-write and no host taking writes, a pool that
// needs a session fails at once with a read-only refusal instead of
// connecting to every host of its URL each time.
func TestAWritableOnlyPoolLeavesConnectingToTheChecks(t *testing.T) {
	t.Parallel()
	f := newFailover(t, false)
	f.primary.SetReadOnly(true)
	require.True(t, postgres.IsReadOnly(f.write(t)), "the episode begins")
	sessions := func() int64 { return f.primary.Sessions() + f.standby.Sessions() }
	before, start := sessions(), time.Now()
	for range 200 {
		conn, err := f.pool.Conn(t.Context())
		if err == nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never reused
			_ = conn.Close()
			continue
		}
		require.True(t, postgres.IsReadOnly(err), "%v", err)
	}
	elapsed := time.Since(start)
	opened := sessions() - before
	t.Logf("200 sessions asked for in %s; %d opened", elapsed.Round(time.Millisecond), opened)
	require.LessOrEqual(t, float64(opened), 2*(4+elapsed.Seconds()), "two hosts a check, a few checks a second")

	f.standby.SetReadOnly(false)
	testbed.Eventually(t, func() error { return f.write(t) })
	require.Len(t, f.logs.Records(t, "postgres: the database refuses writes"), 1)
}

// TestSessionsLeftOnTheOldPrimaryAreDroppedWhenWritesComeBack: a failover
// leaves three sessions on the demoted primary and only one meets a
// refusal. When a check finds the promoted standby, the other two are
// dropped before their next use, not refused one write each: the failover
// stays one episode and every write after it succeeds.
func TestSessionsLeftOnTheOldPrimaryAreDroppedWhenWritesComeBack(t *testing.T) {
	t.Parallel()
	f := &failoverBundle{testBundle: setup(t), primary: testbed.StartDatabaseHost(t), standby: testbed.StartDatabaseHost(t),
		reg: prometheus.NewRegistry(), logs: &testbed.LogBuffer{}}
	f.standby.SetReadOnly(true)
	pool, watch := f.openOn(t, testbed.HostListURL(t, f.db.URL, []string{f.primary.Addr(), f.standby.Addr()},
		url.Values{"target_session_attrs": {"read-write"}}), 3)
	f.pool = pool
	holdOpen(t, pool, 3)

	f.primary.SetReadOnly(true)
	require.True(t, postgres.IsReadOnly(f.write(t)))
	f.standby.SetReadOnly(false)
	f.requireWritesComeBack(t, watch, 6)
}

// TestAStatementRunningWhenWritesStopDoesNotEndTheEpisode: a statement
// already running when the primary turns read-only succeeds on a session
// the server has not switched yet; that is no sign writes are back, and
// the episode a refused write began goes on.
func TestAStatementRunningWhenWritesStopDoesNotEndTheEpisode(t *testing.T) {
	t.Parallel()
	f := &failoverBundle{testBundle: setup(t), primary: testbed.StartDatabaseHost(t), reg: prometheus.NewRegistry(), logs: &testbed.LogBuffer{}}
	pool, watch := f.openOn(t, testbed.HostListURL(t, f.db.URL, []string{f.primary.Addr()}, nil), 2)
	f.pool = pool
	const marker = "SELECT pg_sleep(0.5) AS running_when_writes_stop"
	running := make(chan error, 1)
	go func() {
		_, err := pool.ExecContext(t.Context(), marker)
		running <- err
	}()
	testbed.Eventually(t, func() error {
		var n int
		if err := f.db.SQL.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'`, marker).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return errors.New("the statement is not running yet")
		}
		return nil
	})

	f.primary.SetReadOnly(true)
	require.True(t, postgres.IsReadOnly(f.write(t)), "a write on another session is refused")
	require.NoError(t, <-running, "the statement that was running succeeds")
	require.True(t, postgres.IsReadOnly(watch.AdmitWrite()), "and the episode goes on")
	require.Empty(t, f.logs.Records(t, "postgres: the database accepts writes again"))

	f.primary.SetReadOnly(false)
	f.requireWritesComeBack(t, watch, 2)
}
