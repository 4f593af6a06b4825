package adapters

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestCancelLockWaitOutlastsTheExpiryBatch: a cancel waits for a row longer
// than a batch within its default bounds holds one, its statement timeout
// outlasts that wait (so the wait ends as 55P03, a 409), and both end
// before the API's request deadline (ADR 0014, decision 8).
func TestCancelLockWaitOutlastsTheExpiryBatch(t *testing.T) {
	t.Parallel()
	require.Greater(t, cancelLockWait, DefaultExpireTimeouts.HoldBound())
	require.LessOrEqual(t, DefaultExpireTimeouts.Lock, DefaultExpireTimeouts.Statement, "a lock wait is one statement's")
	require.Greater(t, cancelStatementTimeout, cancelLockWait)
	require.Less(t, cancelStatementTimeout, httpserver.DefaultHandlerTimeout)
}

// cancelDuringBatch runs a cancel of id, as the API does, from inside an
// expiry batch with the default bounds, once the batch has locked id's row
// and the cancel waits for it; then stuck runs in the batch's place (the
// row still held), given a channel closed when the cancel has returned. It
// returns the cancel's error and the batch's.
func cancelDuringBatch(t *testing.T, b *expireBundle, id uuid.UUID, stuck func(cancelReturned <-chan struct{})) (cancelErr, batchErr error) {
	t.Helper()
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	returned := make(chan struct{})
	var once sync.Once
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	_, batchErr = b.batches.ExpireBatch(b.ctx, expiry.ExpireBatch{AsOf: asOf, Limit: 10, Expire: func(p *domain.Purchase) error {
		once.Do(func() {
			require.Equal(t, 1, b.locked(t, []uuid.UUID{id}), "the batch holds the row")
			go func() {
				defer close(returned)
				cancelErr = purchases.UpdatePurchase(b.ctx, id, func(p *domain.Purchase) error {
					return p.Cancel("test", uuid.New(), time.Now())
				})
			}()
			b.db.WaitForLockWaiters(t, 1)
			stuck(returned)
		})
		return p.Expire(asOf)
	}})
	select {
	case <-returned:
	case <-time.After(testbed.ForwardDeadline):
		t.Fatal("the cancel did not return")
	}
	return cancelErr, batchErr
}

// requireCancelled checks that the cancel won: the purchase is Cancelled
// with one Cancelled event after its Active one, and no Expired event.
func requireCancelled(t *testing.T, b *expireBundle, id uuid.UUID) {
	t.Helper()
	require.Equal(t, "Cancelled", b.row(t, id).Status)
	events := b.events(t)
	require.Len(t, events, 1, "the Cancelled event alone: the fixture wrote no Active one, the batch rolled back")
	require.Equal(t, "Cancelled", string(events[0].Envelope.Payload.Status))
}

// TestCancelOutwaitsAFrozenExpiryBatch: a batch frozen between its
// selection and its write (its process stopped) holds the row until the
// server ends its session (idle_in_transaction_session_timeout, 5 s); a
// cancel that reached the row meanwhile waits that long and succeeds,
// rather than answering 409 purchase-busy after 2 s as it did.
func TestCancelOutwaitsAFrozenExpiryBatch(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	id := b.insertDue(t, 1)[0]

	cancelErr, batchErr := cancelDuringBatch(t, b, id, func(cancelReturned <-chan struct{}) {
		// Frozen until the cancel returns: it can take the row only once
		// the server has ended this session, or give up.
		select {
		case <-cancelReturned:
		case <-time.After(testbed.ForwardDeadline):
			t.Fatal("the cancel did not return")
		}
	})

	require.NoError(t, cancelErr, "the cancel waited for the frozen batch")
	require.Error(t, batchErr, "the frozen batch's session is gone")
	requireCancelled(t, b, id)
}

// TestCancelOutwaitsAnExpiryBatchStatementAtItsBound: a batch whose write
// runs until its statement_timeout (6 s; a trigger sleeps on the Expired
// row only) holds the row that long and rolls back; the cancel waiting for
// it then succeeds.
func TestCancelOutwaitsAnExpiryBatchStatementAtItsBound(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	id := b.insertDue(t, 1)[0]
	b.exec(t, `CREATE FUNCTION promotion.cancel_wait_test_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_sleep(60);
	RETURN NEW;
END $$`, `CREATE TRIGGER cancel_wait_test_slow BEFORE UPDATE ON promotion.promotion_purchases
	FOR EACH ROW WHEN (NEW.status = 'Expired') EXECUTE FUNCTION promotion.cancel_wait_test_slow()`)

	cancelErr, batchErr := cancelDuringBatch(t, b, id, func(<-chan struct{}) {})

	require.ErrorContains(t, batchErr, "SQLSTATE 57014", "the batch's write ran to its statement_timeout")
	require.NoError(t, cancelErr, "the cancel waited for the batch's statement")
	requireCancelled(t, b, id)
}
