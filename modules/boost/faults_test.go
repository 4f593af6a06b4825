package boost_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestDatabaseFaultIsNotPoisonAndTheRecordIsAppliedOnceItEnds: PostgreSQL
// refusing the projection's insert with 42501 (permission denied) is a
// fault of the database, not of the record: however often it is tried (more
// than the kit's retries), the record is never dead-lettered, the runner
// restarts instead, and once the fault is gone the same record is applied.
func TestDatabaseFaultIsNotPoisonAndTheRecordIsAppliedOnceItEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.refuseContributionsOfWeight(t, 13, "42501")
	target := project(uuid.New())
	b.produce(t, record(t, newPurchase(13, target).envelope(contract.StatusActive, 1)))

	const attempts = 7 // above the batch's try and the 5 of the kit's retries
	testbed.Eventually(t, func() error {
		if n := b.deadLetters(t); n > 0 {
			return nil // fails below
		}
		if n := b.refusedAttempts(t); n < attempts {
			return fmt.Errorf("%d attempts of %d", n, attempts)
		}
		return nil
	})
	require.Zero(t, b.deadLetters(t), "a fault of the database dead-lettered the record")
	require.GreaterOrEqual(t, b.counter(t, "pin_consumer_database_faults_total"), 2.0)
	require.Zero(t, b.counter(t, "pin_consumer_retries_total"), "a fault of the database is not the record's to retry")
	w, a := b.boostOf(t, target)
	require.Equal(t, [2]int{0, 0}, [2]int{w, a})

	require.NoError(t, b.db.Gorm.Exec(`DROP TRIGGER boost_test_refuse ON boost.purchase_targets`).Error)
	b.requireBoost(t, target, 13, 1)
	require.Zero(t, b.deadLetters(t))
}

// TestDataFaultOfOneRecordIsDeadLetteredAndTheNextApplied: PostgreSQL
// refusing one record's own values (23514, a check violation) is that
// record's fault: it is retried, dead-lettered, and the purchase's next
// event, on the same partition, is applied. The next is produced once the
// first is dead-lettered: in one batch, the projection would apply only the
// later snapshot.
func TestDataFaultOfOneRecordIsDeadLetteredAndTheNextApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.refuseContributionsOfWeight(t, 13, "23514")
	target := project(uuid.New())
	p := newPurchase(13, target)
	b.produce(t, record(t, p.envelope(contract.StatusActive, 1)))
	testbed.Eventually(t, func() error {
		if n := b.deadLetters(t); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	require.Equal(t, int64(6), b.refusedAttempts(t), "the batch's try and the kit's five")

	next := p
	next.weight = 5
	b.produce(t, record(t, next.envelope(contract.StatusActive, 2)))
	b.requireBoost(t, target, 5, 1)
	require.Equal(t, int64(1), b.deadLetters(t))
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_dead_letters_total"))
	require.Zero(t, b.counter(t, "pin_consumer_database_faults_total"))
}

// refuseContributionsOfWeight makes every insert into boost.purchase_targets
// of a row of that weight raise sqlstate, counting the attempts in the
// sequence boost_test_attempts (a sequence is not rolled back).
func (b *bundle) refuseContributionsOfWeight(tb testing.TB, weight int, sqlstate string) {
	tb.Helper()
	require.NoError(tb, b.db.Gorm.Exec(fmt.Sprintf(`
		CREATE SEQUENCE boost_test_attempts;
		CREATE FUNCTION boost_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.boost_weight = %d THEN
				PERFORM nextval('boost_test_attempts');
				RAISE EXCEPTION 'refused by the test' USING ERRCODE = '%s';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER boost_test_refuse BEFORE INSERT ON boost.purchase_targets
			FOR EACH ROW EXECUTE FUNCTION boost_test_refuse();`, weight, sqlstate)).Error)
}

// refusedAttempts is how many inserts refuseContributionsOfWeight refused.
func (b *bundle) refusedAttempts(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, b.db.Gorm.Raw(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM boost_test_attempts`).Scan(&n).Error)
	return n
}

// deadLetters counts the boost consumer's dead letters.
func (b *bundle) deadLetters(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, b.db.Gorm.Raw(`SELECT count(*) FROM consumer.dead_letters WHERE consumer = 'boost'`).Scan(&n).Error)
	return n
}
