package testbed

import (
	"strings"
	"sync"
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

// HoldLock locks table in mode (LOCK TABLE … IN mode MODE) on a
// transaction of its own, as a migration or an operator would, until
// release, which commits it; a cleanup rolls it back if the test did not.
func (d *Database) HoldLock(tb testing.TB, table, mode string) (release func()) {
	tb.Helper()
	tx, err := d.SQL.Begin()
	require.NoError(tb, err)
	_, err = tx.Exec(`LOCK TABLE ` + table + ` IN ` + mode + ` MODE`)
	require.NoError(tb, err)
	var once sync.Once
	tb.Cleanup(func() { once.Do(func() { _ = tx.Rollback() }) })
	return func() { once.Do(func() { require.NoError(tb, tx.Commit()) }) }
}

// LockedRows counts the rows of table whose uuid column id is one of ids
// and which some transaction holds (FOR UPDATE SKIP LOCKED passes them by).
func (d *Database) LockedRows(tb testing.TB, table string, ids []string) int {
	tb.Helper()
	tx, err := d.SQL.Begin()
	require.NoError(tb, err)
	defer func() { _ = tx.Rollback() }()
	var free int
	require.NoError(tb, tx.QueryRow(`SELECT count(*) FROM (SELECT id FROM `+table+`
		WHERE id = ANY($1::uuid[]) FOR UPDATE SKIP LOCKED) AS free`, "{"+strings.Join(ids, ",")+"}").Scan(&free))
	return len(ids) - free
}
