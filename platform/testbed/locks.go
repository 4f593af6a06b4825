package testbed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WaitForLockWaiters returns once at least n sessions on the database wait
// for a lock (a row, a table, a transaction id): the moment a test that
// holds a lock knows the code under test has reached it.
func (d *Database) WaitForLockWaiters(tb testing.TB, n int) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		var waiting int
		err := d.SQL.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		require.NoError(tb, err)
		return waiting >= n
	}, 20*time.Second, 10*time.Millisecond, "%d sessions waiting for a lock", n)
}
