package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/testbed"
)

// expireRunnerBundle is the real expiry job (runner, cycle, repository,
// outbox) on a fresh database.
type expireRunnerBundle struct {
	ctx    context.Context
	db     *testbed.Database
	cycle  *expiry.ExpireCycle
	logs   *promotiontest.LogBuffer
	logger *slog.Logger
	pkg    promotiontest.Package
}

func newExpireRunnerBundle(tb testing.TB) *expireRunnerBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	logs := &promotiontest.LogBuffer{}
	logger := observability.NewLogger(logs, slog.LevelInfo)
	store, err := adapters.NewExpireRepository(db.Gorm, promotiontest.Publisher(tb, nil))
	require.NoError(tb, err)
	cycle := promotiontest.ExpireCycle(tb, promotiontest.ExpireBatches(tb, store), telemetry.ExpireTelemetryDeps{Logger: logger})
	pkg := promotiontest.InsertPackage(tb, db, promotiontest.Package{
		Code: "runner-test-week", Name: "Runner test", Kind: domain.PackageKindPostBoost,
		DurationDays: 7, BoostWeight: 5, Price: decimal.RequireFromString("99.90"),
	})
	return &expireRunnerBundle{ctx: context.Background(), db: db, cycle: cycle, logs: logs, logger: logger, pkg: pkg}
}

// runner is the job's runner over the bundle's cycle. It logs into the
// same JSON sink as the cycle, so every line there is a record.
func (b *expireRunnerBundle) runner(tb testing.TB, interval, budget time.Duration) *expiry.ExpireRunner {
	tb.Helper()
	r, err := expiry.NewExpireRunner(b.cycle, promotiontest.ExpireSettings(expiry.ExpireSettings{Interval: interval, BatchSize: 200, MaxBatchesPerCycle: 1, CycleBudget: budget}), b.logger)
	require.NoError(tb, err)
	return r
}

// insertPurchase stores an Active purchase with one target that runs a week
// and ends at endsAt (so it may already be due: the period is moved into the
// past as a whole).
func (b *expireRunnerBundle) insertPurchase(tb testing.TB, endsAt time.Time) uuid.UUID {
	tb.Helper()
	return promotiontest.InsertPurchases(tb, b.db, b.pkg, 1, promotiontest.Purchases{EndsAt: endsAt})[0]
}

// lockedRows counts the purchases whose rows some transaction holds.
func (b *expireRunnerBundle) lockedRows(tb testing.TB) int {
	tb.Helper()
	tx, err := b.db.SQL.BeginTx(b.ctx, nil)
	require.NoError(tb, err)
	defer func() { _ = tx.Rollback() }()
	var total, free int
	require.NoError(tb, tx.QueryRowContext(b.ctx, `SELECT count(*) FROM promotion.promotion_purchases`).Scan(&total))
	require.NoError(tb, tx.QueryRowContext(b.ctx, `SELECT count(*) FROM (SELECT id FROM promotion.promotion_purchases
		FOR UPDATE SKIP LOCKED) AS free`).Scan(&free))
	return total - free
}

// blockUpdates makes every UPDATE of the purchases wait for an advisory lock
// that the test holds on its own session (a session lock opens no
// transaction). release lets them go; it is also registered as cleanup.
func (b *expireRunnerBundle) blockUpdates(tb testing.TB) (release func()) {
	tb.Helper()
	const key = 7_070_707
	conn, err := b.db.SQL.Conn(b.ctx)
	require.NoError(tb, err)
	_, err = conn.ExecContext(b.ctx, `SELECT pg_advisory_lock($1)`, key)
	require.NoError(tb, err)
	promotiontest.Exec(tb, b.db, fmt.Sprintf(`CREATE FUNCTION promotion.expire_test_wait() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(%d);
	RETURN NULL;
END $$`, key), `CREATE TRIGGER expire_test_wait BEFORE UPDATE ON promotion.promotion_purchases
	FOR EACH STATEMENT EXECUTE FUNCTION promotion.expire_test_wait()`)
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, key)
			require.NoError(tb, err)
			require.NoError(tb, conn.Close())
		})
	}
	tb.Cleanup(release)
	return release
}

// waitForBlockedUpdate polls until a session waits for the test's advisory
// lock: the batch is in flight, with its rows locked.
func (b *expireRunnerBundle) waitForBlockedUpdate(tb testing.TB) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		var n int
		require.NoError(tb, b.db.SQL.QueryRowContext(b.ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
		if n == 0 {
			return errors.New("the batch's UPDATE does not block yet")
		}
		return nil
	})
}

// Tests table, row "Cancellation": the runner is stopped while its batch is
// in flight. The batch commits whole, the row locks are released, and Run
// returns only after that.
func TestExpireRunnerStopCommitsBatchInFlight(t *testing.T) {
	t.Parallel()
	b := newExpireRunnerBundle(t)
	for range 5 {
		b.insertPurchase(t, time.Now().Add(-time.Hour))
	}
	release := b.blockUpdates(t)
	stop := testbed.StartRunner(t, b.runner(t, time.Hour, 30*time.Second))
	b.waitForBlockedUpdate(t)
	require.Equal(t, 5, b.lockedRows(t), "the batch holds its rows")

	stopped := stopInBackground(stop)
	select {
	case <-stopped:
		t.Fatal("Run returned while its batch was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	<-stopped

	require.Equal(t, map[string]int{"Expired": 5}, promotiontest.StatusCounts(t, b.db), "committed whole")
	require.Equal(t, 5, promotiontest.OutboxCount(t, b.db))
	require.Zero(t, b.lockedRows(t), "locks released")
	require.Contains(t, b.logs.String(), `"msg":"cycle completed"`)
}

// The budget stops new batches; it does not kill one: the cycle
// budget runs out while the batch still waits, and then the runner is
// stopped. The batch is not cut: once it can move it commits whole, and only
// then does Run return.
func TestExpireRunnerBatchSlowerThanBudgetCommits(t *testing.T) {
	t.Parallel()
	const budget = 50 * time.Millisecond
	b := newExpireRunnerBundle(t)
	for range 5 {
		b.insertPurchase(t, time.Now().Add(-time.Hour))
	}
	release := b.blockUpdates(t)
	stop := testbed.StartRunner(t, b.runner(t, time.Hour, budget))
	b.waitForBlockedUpdate(t)
	// The cycle started before the update blocked, so its budget is spent
	// by now + budget: wait for that, not for a tolerance.
	time.Sleep(budget)

	stopped := stopInBackground(stop)
	select {
	case <-stopped:
		t.Fatal("Run returned while its batch was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, 5, b.lockedRows(t), "the batch still holds its rows")
	release()
	<-stopped

	require.Equal(t, map[string]int{"Expired": 5}, promotiontest.StatusCounts(t, b.db), "committed whole after its budget")
	require.Equal(t, 5, promotiontest.OutboxCount(t, b.db))
	require.Zero(t, b.lockedRows(t), "locks released")
	require.Contains(t, b.logs.String(), `"msg":"cycle completed"`)
	require.NotContains(t, b.logs.String(), `"msg":"cycle failed"`)
}

// Tests table, row "SLO точности": a purchase with EndsAt = t is expired by
// the first cycle whose AsOf is at or after t, which starts no later than
// t + Interval (+ the duration of a cycle that overran) — here with a short
// interval.
func TestExpireRunnerSLO(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	b := newExpireRunnerBundle(t)
	stop := testbed.StartRunner(t, b.runner(t, interval, interval))
	endsAt := time.Now().Add(interval + 150*time.Millisecond).UTC().Truncate(time.Microsecond)
	id := b.insertPurchase(t, endsAt)

	var expiredAt time.Time
	testbed.Eventually(t, func() error {
		var status string
		require.NoError(t, b.db.SQL.QueryRowContext(b.ctx,
			`SELECT status, updated_at FROM promotion.promotion_purchases WHERE id = $1`, id).Scan(&status, &expiredAt))
		if status != "Expired" {
			return fmt.Errorf("the purchase is %s", status)
		}
		return nil
	})
	observed := time.Now()
	// "promotion expired" is logged after the commit: wait for the cycle to
	// finish before reading the log.
	stop()

	// The cycle that expired it is the first one with AsOf >= EndsAt.
	cycles := b.logs.Records(t, "cycle started")
	expiredBy := b.logs.Records(t, "promotion expired")
	require.Len(t, expiredBy, 1)
	runID := expiredBy[0]["run_id"]
	var asOf, previous time.Time
	for _, c := range cycles {
		at, err := time.Parse(time.RFC3339Nano, c["as_of"].(string))
		require.NoError(t, err)
		if c["run_id"] == runID {
			asOf = at
			break
		}
		require.True(t, at.Before(endsAt), "a cycle at %s, after EndsAt %s, missed the purchase", at, endsAt)
		previous = at
	}
	require.False(t, asOf.IsZero())
	require.True(t, expiredAt.Equal(asOf), "UpdatedAt = the cycle's AsOf")
	require.False(t, asOf.Before(endsAt))
	// The first cycle after EndsAt expired it, so EndsAt -> AsOf is under one
	// tick gap; the gap's length is TestExpireRunnerTicksOneIntervalApart's,
	// without the wall clock.
	require.True(t, previous.Before(endsAt), "the cycle before (%s) was before EndsAt", previous)
	t.Logf("EndsAt -> AsOf %s, EndsAt -> observed %s (interval %s)", asOf.Sub(endsAt), observed.Sub(endsAt), interval)
}
