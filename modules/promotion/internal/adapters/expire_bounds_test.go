package adapters

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/testbed"
)

// outboxTable is the outbox; the purchase-changed topic is its only table
// here, and a lock or a constraint on it reaches that table.
const outboxTable = outbox.MessagesTable

// holdOutboxLock locks the event's outbox table against inserts from
// another session until release.
func (b *expireBundle) holdOutboxLock(tb testing.TB) (release func()) {
	tb.Helper()
	return b.db.HoldLock(tb, outboxTable, "EXCLUSIVE")
}

// locked counts the purchases among ids whose rows a transaction holds.
func (b *expireBundle) locked(tb testing.TB, ids []uuid.UUID) int {
	tb.Helper()
	return b.db.LockedRows(tb, purchasesTable, uuidStrings(ids))
}

// awaitUnlocked polls until no row of ids is held.
func (b *expireBundle) awaitUnlocked(tb testing.TB, ids []uuid.UUID) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		if n := b.locked(tb, ids); n > 0 {
			return fmt.Errorf("%d purchases still locked", n)
		}
		return nil
	})
}

// requireBatchFault checks what a fault of the database leaves behind: the
// batch rolled back whole, no poison, one `cycle failed` and no `item
// failed`, the rows free.
func (b *expireBundle) requireBatchFault(tb testing.TB, ids []uuid.UUID) {
	tb.Helper()
	require.Equal(tb, map[string]int{"Active": len(ids)}, b.statusCounts(tb), "the whole batch rolled back")
	require.Zero(tb, promotiontest.Count(tb, b.db, `SELECT count(*) FROM `+outboxTable), "no event")
	require.Zero(tb, promotiontest.Count(tb, b.db, `SELECT count(*) FROM promotion.expire_poison`), "nothing is remembered as poison")
	require.Empty(tb, b.logs.Records(tb, "item failed"))
	require.Len(tb, b.logs.Records(tb, "cycle failed"), 1)
	require.Zero(tb, b.locked(tb, ids), "the batch let go of its rows")
}

// A batch that waits on a lock longer than lock_timeout fails with 55P03,
// a fault of the database: another session holds the outbox table locked.
// The batch lets go of its rows while that lock is still held, and once it
// is released the next cycle expires them all.
func TestExpireBatchLockTimeoutIsAFault(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.store.SetTimeouts(ExpireTimeouts{Lock: 200 * time.Millisecond, Statement: time.Minute, IdleInTransaction: time.Minute})
	ids := b.insertDue(t, 5)
	release := b.holdOutboxLock(t)

	_, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200}))

	require.ErrorContains(t, err, "SQLSTATE 55P03")
	b.requireBatchFault(t, ids)
	release()
	require.Equal(t, 5, b.run(t, 200, 1).Expired, "the next cycle expires what was left")
}

// A statement that runs past statement_timeout fails with 57014, a fault
// of the database: here a trigger makes the batch's write sleep.
func TestExpireBatchStatementTimeoutIsAFault(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.store.SetTimeouts(ExpireTimeouts{Lock: time.Minute, Statement: 300 * time.Millisecond, IdleInTransaction: time.Minute})
	ids := b.insertDue(t, 5)
	b.exec(t, `CREATE FUNCTION promotion.expire_test_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_sleep(60);
	RETURN NULL;
END $$`, `CREATE TRIGGER expire_test_slow BEFORE UPDATE ON promotion.promotion_purchases
	FOR EACH STATEMENT EXECUTE FUNCTION promotion.expire_test_slow()`)

	_, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200}))

	require.ErrorContains(t, err, "SQLSTATE 57014")
	b.requireBatchFault(t, ids)
	b.exec(t, `DROP TRIGGER expire_test_slow ON promotion.promotion_purchases`)
	require.Equal(t, 5, b.run(t, 200, 1).Expired, "the next cycle expires what was left")
}

// A job frozen inside its transaction (here: stuck in the Go step between
// the selection and the write) holds its rows no longer than
// idle_in_transaction_session_timeout: the server ends its session while
// it is still stuck, the batch fails as a fault when it wakes, and the
// next cycle expires the rows.
func TestExpireFrozenBatchLetsGoAfterIdleTimeout(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.store.SetTimeouts(ExpireTimeouts{Lock: time.Minute, Statement: time.Minute, IdleInTransaction: 300 * time.Millisecond})
	ids := b.insertDue(t, 5)
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	var once sync.Once
	_, err := b.batches.ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, Expire: func(p *domain.Purchase) error {
		once.Do(func() {
			require.Equal(t, 5, b.locked(t, ids), "frozen with its rows locked")
			b.awaitUnlocked(t, ids) // the server ended the idle session
		})
		return p.Expire(asOf)
	}})

	require.Error(t, err, "the batch's session is gone")
	require.Equal(t, map[string]int{"Active": 5}, b.statusCounts(t))
	require.Zero(t, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison`))
	require.Equal(t, 5, b.run(t, 200, 1).Expired, "the next cycle expires what was left")
}

// A stop cancels a blocked batch on the server once StopTimeout has
// passed: the lock wait ends with 57014 (the lock timeout is far away),
// the rows are free while the other session still holds its lock, and no
// backend is left waiting for it.
func TestExpireStopCancelsBlockedBatchOnTheServer(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	b.store.SetTimeouts(ExpireTimeouts{Lock: 10 * time.Minute, Statement: 10 * time.Minute, IdleInTransaction: 10 * time.Minute})
	ids := b.insertDue(t, 5)
	release := b.holdOutboxLock(t)
	ctx, stop := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.cycle.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 200, StopTimeout: 100 * time.Millisecond}))
		done <- err
	}()
	b.db.WaitForLockWaiters(t, 1)

	stop()
	var err error
	select {
	case err = <-done:
	case <-time.After(testbed.ForwardDeadline):
		t.Fatal("the stopped cycle did not return")
	}

	require.ErrorContains(t, err, "SQLSTATE 57014")
	require.ErrorContains(t, err, "stop timeout")
	b.awaitUnlocked(t, ids)
	testbed.Eventually(t, func() error {
		if n := promotiontest.Count(t, b.db, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`); n > 0 {
			return fmt.Errorf("%d backends still wait for a lock", n)
		}
		return nil
	})
	b.requireBatchFault(t, ids)
	release()
	require.Equal(t, 5, b.run(t, 200, 1).Expired, "the next cycle expires what was left")
}

// A bad migration that makes the outbox refuse every event (a CHECK (false)
// NOT VALID) is a fault of the batch, not poison: the cycle fails naming
// the constraint, nothing is quarantined, and once the constraint is
// dropped the next cycle expires all 12.
func TestExpireOutboxRefusingEveryEventIsAFault(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 12)
	b.exec(t, `ALTER TABLE `+outboxTable+` ADD CONSTRAINT expire_test_refuse_all CHECK (false) NOT VALID`)

	_, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 50}))

	require.ErrorContains(t, err, "SQLSTATE 23514")
	require.ErrorContains(t, err, "expire_test_refuse_all")
	b.requireBatchFault(t, ids)
	b.exec(t, `ALTER TABLE `+outboxTable+` DROP CONSTRAINT expire_test_refuse_all`)
	require.Equal(t, 12, b.run(t, 50, 1).Expired)
}

// A bad constraint on the purchases table that refuses every expiry is
// refused alike by every row (expiry.RefusedAlike): a fault of the batch, not
// twelve poison purchases.
func TestExpirePurchasesConstraintRefusingEveryRowIsAFault(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 12)
	b.exec(t, `ALTER TABLE promotion.promotion_purchases ADD CONSTRAINT expire_test_refuse_all CHECK (status <> 'Expired') NOT VALID`)

	_, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 50}))

	var alike *expiry.RefusedAlikeError
	require.ErrorAs(t, err, &alike)
	require.Equal(t, 12, alike.Rows)
	require.Equal(t, "SQLSTATE 23514 on promotion.promotion_purchases, constraint expire_test_refuse_all", alike.Refusal)
	b.requireBatchFault(t, ids)
	b.exec(t, `ALTER TABLE promotion.promotion_purchases DROP CONSTRAINT expire_test_refuse_all`)
	require.Equal(t, 12, b.run(t, 50, 1).Expired)
}

// A data error that another table raises is no row's own, on either write
// path: the outbox refusing one purchase's event (by a constraint, or from
// inside outbox.publish naming no table), or a trigger on the purchases
// writing a row another table refuses. The batch fails whole.
func TestExpireDataErrorOfAnotherTableIsAFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, setup, constraint string
	}{
		{"outbox refuses one event", `ALTER TABLE ` + outboxTable + ` ADD CONSTRAINT expire_test_refuse_one
			CHECK (metadata->>'partition_key' <> '%s') NOT VALID`, "expire_test_refuse_one"},
		// A data error naming no table, raised inside outbox.publish: the
		// transition's own statement, yet the outbox's refusal (ownRefusal).
		{"outbox raises for one event", `CREATE FUNCTION promotion.expire_test_outbox_raise() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.metadata->>'partition_key' = '%s' THEN
					RAISE EXCEPTION 'expire test: the outbox refuses it' USING ERRCODE = 'check_violation';
				END IF;
				RETURN NEW;
			END $$;
			CREATE TRIGGER expire_test_outbox_raise BEFORE INSERT ON ` + outboxTable + `
				FOR EACH ROW EXECUTE FUNCTION promotion.expire_test_outbox_raise()`, "the outbox refuses it"},
		{"a trigger's write refused", `CREATE TABLE promotion.expire_test_audit (id uuid CONSTRAINT expire_test_audit_refuse CHECK (id <> '%s'));
			CREATE FUNCTION promotion.expire_test_audit() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				INSERT INTO promotion.expire_test_audit VALUES (NEW.id);
				RETURN NEW;
			END $$;
			CREATE TRIGGER expire_test_audit AFTER UPDATE ON promotion.promotion_purchases
				FOR EACH ROW EXECUTE FUNCTION promotion.expire_test_audit()`, "expire_test_audit_refuse"},
	} {
		for _, rowByRow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, row by row %v", tc.name, rowByRow), func(t *testing.T) {
				t.Parallel()
				b := newExpireBundle(t)
				ids := b.insertDue(t, 5)
				b.exec(t, fmt.Sprintf(tc.setup, ids[2]))
				batch := b.batches.ExpireBatch
				if rowByRow {
					batch = b.batches.RowByRow
				}
				asOf := time.Now().UTC().Truncate(time.Microsecond)

				_, err := batch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, Expire: func(p *domain.Purchase) error { return p.Expire(asOf) }})

				require.ErrorContains(t, err, "SQLSTATE 23514")
				require.ErrorContains(t, err, tc.constraint)
				require.Equal(t, map[string]int{"Active": 5}, b.statusCounts(t))
				require.Zero(t, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison`))
			})
		}
	}
}

// Poison keeps its retry place while a backlog fills every batch: 3
// purchases without targets fall due before 40 healthy ones, batches of
// 10, one per cycle. The first cycle meets the poison; every later batch
// takes 9 due purchases and retries one poison purchase, least recently
// tried first, so each is retried once within the next 3 cycles, and no
// batch takes more than 10.
func TestExpirePoisonRetriedWhileBatchesAreFull(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	poison := b.insertPurchases(t, 3, promotiontest.Purchases{})
	b.makeDue(t, 2*time.Hour, poison...)
	b.exec(t, `DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id IN ('`+
		poison[0].String()+`','`+poison[1].String()+`','`+poison[2].String()+`')`)
	b.insertDue(t, 40)

	first := b.run(t, 10, 1)
	require.Equal(t, 7, first.Expired)
	require.Equal(t, 3, first.Failed)
	for cycle := 2; cycle <= 4; cycle++ {
		res := b.run(t, 10, 1)
		require.Equal(t, 9, res.Expired, "cycle %d: the due purchases fill the rest", cycle)
		require.Equal(t, 1, res.Failed, "cycle %d: one place kept for a retry", cycle)
	}
	require.Equal(t, 3, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison WHERE failures = 2`),
		"each poison purchase retried once in 3 full cycles")
	require.EqualValues(t, 40-7-27, b.metric(t, "promotion_expire_backlog"), "the healthy backlog still drains")
	require.EqualValues(t, 3, b.metric(t, "promotion_expire_poison_purchases"), "counted apart")
}

// Known poison retried alone is not taken for a schema's fault: two
// purchases a trigger refuses with the same SQLSTATE become poison beside
// healthy ones, and a later batch that retries only them keeps them as
// poison and completes (expiry.RefusedAlike counts the due rows only).
func TestExpireKnownPoisonRefusedAlikeStaysPoison(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	ids := b.insertDue(t, 5)
	b.exec(t, fmt.Sprintf(`CREATE FUNCTION promotion.expire_test_refuse_two() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id IN ('%s', '%s') THEN
		RAISE EXCEPTION 'expire test: refused' USING ERRCODE = 'check_violation';
	END IF;
	RETURN NEW;
END $$`, ids[1], ids[3]), `CREATE TRIGGER expire_test_refuse_two BEFORE UPDATE ON promotion.promotion_purchases
	FOR EACH ROW EXECUTE FUNCTION promotion.expire_test_refuse_two()`)

	first := b.run(t, 20, 1)
	require.Equal(t, 3, first.Expired)
	require.Equal(t, 2, first.Failed)

	again := b.run(t, 20, 1)
	require.Zero(t, again.Expired)
	require.Equal(t, 2, again.Failed, "retried, and still poison")
	require.Equal(t, 2, promotiontest.Count(t, b.db, `SELECT count(*) FROM promotion.expire_poison WHERE failures = 2`))
	require.Empty(t, b.logs.Records(t, "cycle failed"))
}
