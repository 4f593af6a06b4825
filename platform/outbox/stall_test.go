package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// TestLongTransactionsElsewhereHoldNothingBack keeps an xid and a
// REPEATABLE READ snapshot open in another database of the cluster for 60 s
// of traffic at 200 events/s: a relay that waited for the oldest xid would
// stall for the whole minute, so p99 commit-to-Kafka must stay under 200 ms,
// or under three times the p99 of the busier of two reference runs, one
// before and one after, when the machine is too busy for that (a stall
// would still be tens of seconds).
//
// Not parallel: the bound is measured with the package's other tests paused.
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
	// A second reference after the run: other tests' load that hit the
	// minute may have hit this too, and the bound follows the busier one.
	after := rig.offer(t, 200, 15*time.Second, 1, 4)
	t.Logf("reference after, nothing open elsewhere: p50 %.1fms, p99 %.1fms, max %.1fms", after.p(50), after.p(99), after.p(100))

	busiest := max(ref.p(99), after.p(99))
	bound := max(200, 3*busiest)
	if bound > 200 {
		t.Logf("the machine is too busy for the 200ms bound (reference p99 %.1fms): holding p99 to three times the reference", busiest)
	}
	require.Less(t, r.p(99), bound, "p99 commit-to-Kafka in ms")
}
