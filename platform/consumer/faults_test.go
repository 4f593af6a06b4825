package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestDatabaseFaultOfTheKitsOwnStatementReturnsFromRunAndDeadLettersNothing:
// the inbox refusing its insert with 55P03 (lock not available) is no
// record's fault: Run returns it at the first try, without retries or a dead
// letter, and once the fault is gone the record is applied.
func TestDatabaseFaultOfTheKitsOwnStatementReturnsFromRunAndDeadLettersNothing(t *testing.T) {
	t.Parallel()
	k := newKit(t, consumer.Config{Name: "kit-db-fault", MaxAttempts: 2, RetryBackoff: time.Millisecond})
	db, reg, r := k.db, k.reg, k.runner
	require.NoError(t, db.Gorm.Exec(`
		CREATE FUNCTION kit_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '55P03'; END $$;
		CREATE TRIGGER kit_test_refuse BEFORE INSERT ON consumer.inbox
			FOR EACH ROW EXECUTE FUNCTION kit_test_refuse();`).Error)

	k.produce(t, testEvent{MessageID: uuid.New(), Aggregate: "a", Version: 1})

	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	err := r.Run(ctx)
	require.ErrorContains(t, err, "SQLSTATE 55P03", "Run returns a fault of the database")
	require.ErrorContains(t, err, "fault of the database applying "+topic)
	var dead int64
	require.NoError(t, db.Gorm.Raw(`SELECT count(*) FROM consumer.dead_letters`).Scan(&dead).Error)
	require.Zero(t, dead)
	require.Equal(t, 1.0, testbed.Metric(t, reg, "pin_consumer_database_faults_total").GetCounter().GetValue())
	require.Zero(t, testbed.Metric(t, reg, "pin_consumer_retries_total").GetCounter().GetValue())
	require.Zero(t, testbed.Metric(t, reg, "pin_consumer_consumed_total").GetCounter().GetValue())

	require.NoError(t, db.Gorm.Exec(`DROP TRIGGER kit_test_refuse ON consumer.inbox`).Error)
	testbed.StartRunner(t, r)
	testbed.Eventually(t, func() error {
		if n := testbed.Metric(t, reg, "pin_consumer_consumed_total").GetCounter().GetValue(); n != 1 {
			return errors.New("the record is not applied yet")
		}
		return nil
	})
	require.Equal(t, 0.0, testbed.Metric(t, reg, "pin_consumer_dead_letters_total").GetCounter().GetValue())
}
