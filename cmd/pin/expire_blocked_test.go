package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// outboxTable is the event's outbox table.
const outboxTable = `outbox.pin_promotion_purchase_changed_v1`

// onceProcess is a `pin expire-promotions --once` running in the background.
type onceProcess struct {
	cmd    *exec.Cmd
	stderr *testbed.LogBuffer
	done   chan struct{}
}

func startExpireOnce(t *testing.T, env []string) *onceProcess {
	t.Helper()
	p := &onceProcess{stderr: &testbed.LogBuffer{}, done: make(chan struct{})}
	p.cmd = pinCmd(context.Background(), env, "expire-promotions", "--once", "--batch-size", "50")
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait returns the exit code, failing t if the process has not exited
// within deadline.
func (p *onceProcess) wait(t *testing.T, deadline time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(deadline):
		t.Fatalf("pin expire-promotions --once still running after %s; stderr:\n%s", deadline, p.stderr.String())
		return -1
	}
}

// blockedDB is the database of the blocked-batch tests, with the queries
// they watch it through.
type blockedDB struct{ *testbed.Database }

// makeDue moves the purchases' periods 30 days into the past.
func (db blockedDB) makeDue(t *testing.T, ids []string) {
	t.Helper()
	_, err := db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'
		WHERE id = ANY($1::uuid[])`, "{"+strings.Join(ids, ",")+"}")
	require.NoError(t, err)
}

// locked counts the purchases among ids whose rows a transaction holds.
func (db blockedDB) locked(t *testing.T, ids []string) int {
	t.Helper()
	return db.LockedRows(t, "promotion.promotion_purchases", ids)
}

// blockedOnce makes due due, locks the outbox table against the batch's
// insert, and starts a --once that is then waiting on that lock, holding
// due; it returns the job, its backend's pid and the lock's release.
func (db blockedDB) blockedOnce(t *testing.T, env, due []string) (job *onceProcess, pid int, release func()) {
	t.Helper()
	db.makeDue(t, due)
	release = db.HoldLock(t, outboxTable, "EXCLUSIVE")
	job = startExpireOnce(t, env)
	pid = db.lockWaiter(t)
	require.Equal(t, len(due), db.locked(t, due), "the batch holds its rows while it waits")
	return job, pid, release
}

// awaitUnlocked polls until no row of ids is held, and returns how long
// that took.
func (db blockedDB) awaitUnlocked(t *testing.T, ids []string) time.Duration {
	t.Helper()
	start := time.Now()
	testbed.Eventually(t, func() error {
		if n := db.locked(t, ids); n > 0 {
			return fmt.Errorf("%d purchases still locked", n)
		}
		return nil
	})
	return time.Since(start)
}

// lockWaiter returns the pid of the one session waiting for a lock.
func (db blockedDB) lockWaiter(t *testing.T) int {
	t.Helper()
	db.WaitForLockWaiters(t, 1)
	var pid int
	require.NoError(t, db.SQL.QueryRow(`SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&pid))
	return pid
}

// idleBoundOff lifts the test database's idle_in_transaction_session_timeout
// for sessions opened until t ends, as production runs without one.
func (db blockedDB) idleBoundOff(t *testing.T) {
	t.Helper()
	alter := func(to string) error {
		_, err := db.SQL.Exec(fmt.Sprintf(`ALTER DATABASE %q SET idle_in_transaction_session_timeout = %s`, db.Name, to))
		return err
	}
	require.NoError(t, alter("0"))
	t.Cleanup(func() {
		require.NoError(t, alter(fmt.Sprintf("'%dms'", testbed.IdleInTransactionTimeout.Milliseconds())))
	})
}

// sessionState is a backend's state ("" once it is gone).
func (db blockedDB) sessionState(t *testing.T, pid int) string {
	t.Helper()
	var state sql.NullString
	err := db.SQL.QueryRow(`SELECT state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state)
	if err == sql.ErrNoRows {
		return ""
	}
	require.NoError(t, err)
	return state.String
}

// TestExpireOnceBlockedBatchLetsGo runs the built binary against another
// session holding the outbox table locked, as production meets it, and
// against a bad migration: whatever blocks a batch, it lets go of its rows
// in bounded time, and the next cycle expires what was left.
//   - SIGTERM to a blocked --once ends it within PIN_SHUTDOWN_TIMEOUT: its
//     statement is cancelled on the server (57014) and rolls back, before
//     lock_timeout (5 s) would have fired.
//   - SIGKILL to a blocked --once: the orphaned backend's lock_timeout ends
//     its wait, and the rows are free while the lock is still held.
//   - SIGSTOP inside its transaction, after its write: the server ends the
//     idle session (idle_in_transaction_session_timeout, 5 s) while the
//     process is still frozen.
//   - SIGSTOP while it waits, so that its batch aborts on lock_timeout
//     (55P03) and the frozen client never rolls back: the aborted batch's
//     SET LOCAL timeouts are gone, and the pool's own idle bound (5 s) ends
//     the session, with no database default to fall back on.
//   - A CHECK (false) NOT VALID on the outbox table: exit non-zero, no
//     purchase remembered as poison.
func TestExpireOnceBlockedBatchLetsGo(t *testing.T) {
	t.Parallel()
	db := blockedDB{testbed.NewDatabase(t)}
	ids := purchasesThroughAPI(t, db.Database, 32)
	env := []string{"PIN_DATABASE_URL=" + db.URL, "PIN_SHUTDOWN_TIMEOUT=4s"}
	expireAll := func(t *testing.T, due []string) {
		t.Helper()
		code, stderr, res := expireOnce(t, db.Database, "50")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, len(due), res.Expired, "the next cycle expires what was left")
	}

	t.Run("SIGTERM", func(t *testing.T) {
		due := ids[0:5]
		job, _, release := db.blockedOnce(t, env, due)

		sent := time.Now()
		require.NoError(t, job.cmd.Process.Signal(syscall.SIGTERM))
		code := job.wait(t, time.Minute)
		took := time.Since(sent)

		require.NotEqual(t, 0, code)
		require.Less(t, took, 4*time.Second, "ended within PIN_SHUTDOWN_TIMEOUT")
		require.Contains(t, job.stderr.String(), "SQLSTATE 57014", "cancelled on the server")
		require.Contains(t, job.stderr.String(), "stop timeout")
		unlocked := db.awaitUnlocked(t, due)
		t.Logf("exited %v after SIGTERM; rows free %v after that, the outbox still locked", took.Round(time.Millisecond), unlocked.Round(time.Millisecond))
		release()
		expireAll(t, due)
	})

	t.Run("SIGKILL", func(t *testing.T) {
		due := ids[5:10]
		job, _, release := db.blockedOnce(t, env, due)

		require.NoError(t, job.cmd.Process.Kill())
		job.wait(t, time.Minute)

		unlocked := db.awaitUnlocked(t, due)
		t.Logf("the killed job's rows free %v after the kill, the outbox still locked", unlocked.Round(time.Millisecond))
		release()
		expireAll(t, due)
	})

	t.Run("SIGSTOP", func(t *testing.T) {
		due := ids[10:15]
		job, pid, release := db.blockedOnce(t, env, due)
		require.NoError(t, job.cmd.Process.Signal(syscall.SIGSTOP))
		release() // the write goes through; the frozen client never commits
		testbed.Eventually(t, func() error {
			if s := db.sessionState(t, pid); s != "idle in transaction" {
				return fmt.Errorf("the job's session is %q", s)
			}
			return nil
		})
		require.Equal(t, 5, db.locked(t, due), "the frozen job holds its rows")
		idle := time.Now()

		unlocked := db.awaitUnlocked(t, due)
		// The rows are let go as the server ends the session, a moment
		// before the backend leaves pg_stat_activity.
		testbed.Eventually(t, func() error {
			if s := db.sessionState(t, pid); s != "" {
				return fmt.Errorf("the server has not ended the frozen job's session: %q", s)
			}
			return nil
		})
		t.Logf("the frozen job's rows free %v after its session went idle", unlocked.Round(time.Millisecond))
		require.NoError(t, job.cmd.Process.Signal(syscall.SIGCONT))
		require.NotEqual(t, 0, job.wait(t, time.Minute), "woken, its commit fails")
		require.Less(t, time.Since(idle), time.Minute)
		expireAll(t, due)
	})

	t.Run("SIGSTOP after a lock timeout", func(t *testing.T) {
		// Production has no database-wide idle bound; the test databases'
		// (testbed.IdleInTransactionTimeout) would hide a job without one.
		db.idleBoundOff(t)
		due := ids[27:32]
		job, pid, release := db.blockedOnce(t, env, due)
		require.NoError(t, job.cmd.Process.Signal(syscall.SIGSTOP))
		testbed.Eventually(t, func() error {
			if s := db.sessionState(t, pid); s != "idle in transaction (aborted)" {
				return fmt.Errorf("the job's session is %q", s)
			}
			return nil
		})
		aborted := time.Now()
		require.Zero(t, db.locked(t, due), "the abort let go of the rows")

		testbed.Eventually(t, func() error {
			if s := db.sessionState(t, pid); s != "" {
				return fmt.Errorf("the frozen job's aborted session is still %q", s)
			}
			return nil
		})
		t.Logf("the frozen job's aborted session ended %v after its lock timeout", time.Since(aborted).Round(time.Millisecond))
		require.NoError(t, job.cmd.Process.Signal(syscall.SIGCONT))
		require.NotEqual(t, 0, job.wait(t, time.Minute), "woken, its rollback finds the session gone")
		release()
		expireAll(t, due)
	})

	t.Run("outbox refuses every event", func(t *testing.T) {
		due := ids[15:27]
		db.makeDue(t, due)
		_, err := db.SQL.Exec(`ALTER TABLE ` + outboxTable + ` ADD CONSTRAINT black_box_refuse_all CHECK (false) NOT VALID`)
		require.NoError(t, err)

		code, stderr, _ := expireOnce(t, db.Database, "50")

		require.NotEqual(t, 0, code, "a fault, not poison: %s", stderr)
		require.Contains(t, stderr, "SQLSTATE 23514")
		require.Contains(t, stderr, "black_box_refuse_all")
		var poison, active int
		require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM promotion.expire_poison`).Scan(&poison))
		require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases
			WHERE status = 'Active' AND id = ANY($1::uuid[])`, "{"+strings.Join(due, ",")+"}").Scan(&active))
		require.Zero(t, poison, "no purchase quarantined")
		require.Equal(t, 12, active)
		_, err = db.SQL.Exec(`ALTER TABLE ` + outboxTable + ` DROP CONSTRAINT black_box_refuse_all`)
		require.NoError(t, err)
		expireAll(t, due)
	})
}
