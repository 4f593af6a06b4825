package main_test

import (
	"context"
	"database/sql"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// frozenHoldBound is ADR 0014's promise: whatever step a frozen expiry batch
// is stuck in, its rows are let go within 6 s of its transaction's start.
const frozenHoldBound = 6 * time.Second

// largestBatch is PIN_EXPIRE_BATCH_SIZE's largest allowed value.
const largestBatch = 10000

// frozenDB is the database of the frozen-batch tests.
type frozenDB struct{ *testbed.Database }

// seedDue makes n due purchases: one bought through the API, the rest
// copies of it (new ids and targets), all ended an hour ago.
func (db frozenDB) seedDue(t *testing.T, n int) {
	t.Helper()
	first := purchasesThroughAPI(t, db.Database, 1)[0]
	_, err := db.SQL.Exec(`
	WITH src AS (
		SELECT p, gen_random_uuid() AS id FROM promotion.promotion_purchases AS p, generate_series(2, $2::int)
		WHERE p.id = $1
	), purchases AS (
		INSERT INTO promotion.promotion_purchases
		SELECT (jsonb_populate_record(src.p, jsonb_build_object('id', src.id))).* FROM src
	)
	INSERT INTO promotion.promotion_purchase_targets
	SELECT (jsonb_populate_record(t, jsonb_build_object('purchase_id', src.id, 'target_id', gen_random_uuid()))).*
	FROM src JOIN promotion.promotion_purchase_targets AS t ON t.purchase_id = $1`, first, n)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'`)
	require.NoError(t, err)
	_, err = db.SQL.Exec(`VACUUM ANALYZE promotion.promotion_purchases, promotion.promotion_purchase_targets`)
	require.NoError(t, err)
}

// due counts the purchases still due.
func (db frozenDB) due(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases
		WHERE status = 'Active' AND ends_at <= now()`).Scan(&n))
	return n
}

// holder polls, as fast as one connection allows, for a backend of process
// pid whose transaction has locked purchases (it has a transaction id and
// holds the purchases table), and returns it with its transaction's start.
func (db frozenDB) holder(t *testing.T, pid int) (backend int, xactStart time.Time) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		err := conn.QueryRowContext(ctx, `SELECT a.pid, a.xact_start FROM pg_stat_activity AS a
			WHERE a.application_name LIKE $1 AND a.backend_xid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_locks AS l
				WHERE l.pid = a.pid AND l.relation = 'promotion.promotion_purchases'::regclass)`,
			"%-"+strconv.Itoa(pid)+"/%").Scan(&backend, &xactStart)
		if err == nil {
			return backend, xactStart
		}
		require.ErrorIs(t, err, sql.ErrNoRows)
	}
	t.Fatalf("pin (pid %d) locked no purchases within a minute", pid)
	return 0, time.Time{}
}

// frozenBatch is what the server showed of a frozen batch's session until
// it let go of the purchases.
type frozenBatch struct {
	// held is how long after its transaction began the session was last seen
	// holding the purchases table.
	held time.Duration
	// waits are the wait events seen meanwhile.
	waits map[string]bool
}

// awaitLetGo polls the backend until it holds no lock on the purchases table,
// failing t if that takes longer than frozenHoldBound (and a second for the
// polling) from the transaction's start.
func (db frozenDB) awaitLetGo(t *testing.T, backend int, xactStart time.Time) frozenBatch {
	t.Helper()
	seen := frozenBatch{waits: map[string]bool{}}
	deadline := xactStart.Add(frozenHoldBound + time.Second)
	for {
		var held bool
		var wait sql.NullString
		var age float64
		err := db.SQL.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_locks
				WHERE pid = $1 AND relation = 'promotion.promotion_purchases'::regclass),
			(SELECT coalesce(wait_event_type || '/' || wait_event, state) FROM pg_stat_activity WHERE pid = $1),
			extract(epoch FROM clock_timestamp() - $2::timestamptz)`, backend, xactStart).Scan(&held, &wait, &age)
		require.NoError(t, err)
		if !held {
			return seen
		}
		seen.held = time.Duration(age * float64(time.Second))
		seen.waits[wait.String] = true
		if time.Now().After(deadline) {
			t.Fatalf("the frozen batch still holds the purchases %v after its transaction began (waits seen: %v)",
				seen.held.Round(time.Millisecond), seen.waits)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freezeHolding starts cmd and freezes it (SIGSTOP) as soon as its batch
// has locked purchases: at the largest batch, while its selection still
// runs, so the server then sends the rows to a client that reads nothing.
// It returns how the batch let go.
func (db frozenDB) freezeHolding(t *testing.T, cmd *exec.Cmd) frozenBatch {
	t.Helper()
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-done
	})
	backend, xactStart := db.holder(t, cmd.Process.Pid)
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	seen := db.awaitLetGo(t, backend, xactStart)
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	return seen
}

// TestFrozenExpiryBatchLetsGoWithinTheBound freezes (SIGSTOP) the expiry in
// the middle of its selection, as a paused VM or a frozen container would:
// the selection then locks its purchases and the server sends them to a
// client that reads nothing. At the largest allowed batch the rows do not
// fit the sockets' buffers and the backend waits in ClientWrite, where no
// statement or idle timeout applies; at the default batch they may fit and
// the session waits idle in its transaction. Either way no lock is held
// longer than ADR 0014's bound from the transaction's start, and the next
// cycle expires every purchase. The same for `pin serve`'s cycle.
func TestFrozenExpiryBatchLetsGoWithinTheBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		batch int
		serve bool
	}{
		{"once, largest batch", largestBatch, false},
		{"once, default batch", 200, false},
		{"serve, largest batch", largestBatch, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := frozenDB{testbed.NewDatabase(t)}
			db.seedDue(t, tc.batch)
			env := []string{"PIN_DATABASE_URL=" + db.URL, "PIN_EXPIRE_BATCH_SIZE=" + strconv.Itoa(tc.batch)}
			var cmd *exec.Cmd
			if tc.serve {
				brokers := testbed.NewKafka(t, contract.Topic)
				cmd = pinCmd(context.Background(), append(env, "PIN_HTTP_ADDR="+testbed.FreeAddr(t),
					"PIN_KAFKA_BROKERS="+brokers[0], "PIN_AUTH_JWT_SECRET="+jwtSecret), "serve")
			} else {
				cmd = pinCmd(context.Background(), env, "expire-promotions", "--once")
			}
			out := &testbed.LogBuffer{}
			cmd.Stdout, cmd.Stderr = out, out

			seen := db.freezeHolding(t, cmd)
			t.Logf("batch of %d frozen holding its purchases: purchases held %v from the transaction's start; waits seen %v",
				tc.batch, seen.held.Round(time.Millisecond), seen.waits)
			require.Less(t, seen.held, frozenHoldBound, "no lock older than the bound")
			if tc.batch == largestBatch {
				require.True(t, seen.waits["Client/ClientWrite"], "the server was sending rows the frozen client did not read: %v", seen.waits)
			}
			require.Equal(t, tc.batch, db.due(t), "nothing expired by the frozen batch")

			code, stderr, res := expireOnce(t, db.Database, strconv.Itoa(tc.batch))
			require.Equal(t, 0, code, stderr)
			require.Equal(t, tc.batch, res.Expired, "the next cycle expires every purchase")
		})
	}
}

// TestFrozenSnapshotLetsGoWithinTheBound freezes `pin promotion snapshot`
// at its largest batch (1000 purchases locked FOR SHARE) as soon as the
// batch holds them: an operator's pool has no bounds of its own, so the
// batch sets the expiry's, and lets go within the same bound.
func TestFrozenSnapshotLetsGoWithinTheBound(t *testing.T) {
	t.Parallel()
	db := frozenDB{testbed.NewDatabase(t)}
	db.seedDue(t, 1000)
	cmd := pinCmd(context.Background(), []string{"PIN_DATABASE_URL=" + db.URL},
		"promotion", "snapshot", "--batch-size", "1000", "--rate", "100000")
	out := &testbed.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out

	seen := db.freezeHolding(t, cmd)

	t.Logf("snapshot batch of 1000 frozen holding its purchases: held %v from the transaction's start; waits seen %v",
		seen.held.Round(time.Millisecond), seen.waits)
	require.Less(t, seen.held, frozenHoldBound, "no lock older than the bound")
}
