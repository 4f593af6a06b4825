package postgres_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"testing"

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
