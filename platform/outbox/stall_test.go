package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestLongTransactionsElsewhereHoldNothingBack holds, in another database
// of the same cluster, a transaction that took an xid and a REPEATABLE READ
// snapshot, both left idle in transaction, for the whole 60s while events
// are committed one per transaction at 200/s: the commit-to-Kafka p99 stays
// under 200ms. (The relay before issue 10 read only rows below the
// cluster's oldest running xid: every event then waited the full 60s.)
//
// A reference of 15s at 200/s without the open transactions comes first.
// When the machine cannot meet the bound even then (the whole suite under
// the race detector on two cores), the test holds the open transactions to
// the reference instead — p99 at most three times it — and says so: a
// stall would still be tens of seconds.
//
// Not parallel: a latency bound is measured with the package's other tests
// paused (they run after it), not beside the two-minute takeover test.
func TestLongTransactionsElsewhereHoldNothingBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a minute")
	}
	rig := newBenchRig(t)
	ref := rig.offer(t, 200, 15*time.Second, 1, 4)
	t.Logf("reference, nothing open elsewhere: p50 %.1fms, p99 %.1fms, max %.1fms", ref.p(50), ref.p(99), ref.p(100))
	elsewhere := testbed.NewDatabase(t)
	ctx := context.Background()
	writer, err := elsewhere.SQL.Conn(ctx)
	require.NoError(t, err)
	defer writer.Close()
	reader, err := elsewhere.SQL.Conn(ctx)
	require.NoError(t, err)
	defer reader.Close()
	var writerPID, readerPID int
	for _, stmt := range []string{
		`SET idle_in_transaction_session_timeout = 0`, // the test bed's 30s cut-off would end it early
		`BEGIN`,
		`SELECT pg_current_xact_id()`,
	} {
		_, err := writer.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	for _, stmt := range []string{
		`SET idle_in_transaction_session_timeout = 0`,
		`BEGIN ISOLATION LEVEL REPEATABLE READ`,
		`SELECT count(*) FROM pg_class`,
	} {
		_, err := reader.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, writer.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&writerPID))
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&readerPID))

	r := rig.offer(t, 200, time.Minute, 1, 4) // four writers, so that a slow commit does not lower the rate
	t.Logf("commit to Kafka at 200/s beside the open transactions: p50 %.1fms, p99 %.1fms, max %.1fms",
		r.p(50), r.p(99), r.p(100))

	// Both were open and idle in transaction all along, the writer with its xid.
	var open int
	require.NoError(t, rig.db.SQL.QueryRow(`SELECT count(*) FROM pg_stat_activity
		WHERE state = 'idle in transaction' AND xact_start < now() - interval '60 seconds'
		  AND ((pid = $1 AND backend_xid IS NOT NULL) OR (pid = $2 AND backend_xmin IS NOT NULL))`,
		writerPID, readerPID).Scan(&open))
	require.Equal(t, 2, open)
	_, _ = writer.ExecContext(ctx, `ROLLBACK`)
	_, _ = reader.ExecContext(ctx, `ROLLBACK`)

	bound := max(200, 3*ref.p(99))
	if bound > 200 {
		t.Logf("the machine is too busy for the 200ms bound (reference p99 %.1fms): holding p99 to three times the reference", ref.p(99))
	}
	require.Less(t, r.p(99), bound, "p99 commit-to-Kafka in ms")
}
