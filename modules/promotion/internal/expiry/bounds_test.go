package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// A stop lets the batch in flight run on for StopTimeout, and then cancels
// it: the store's statement returns the cancellation (pgx cancels it on the
// server), the batch rolls back, and the cycle fails saying why. On
// synctest's clock the cancel comes exactly StopTimeout after the stop.
func TestExpireCycleStopTimeoutCancelsBatchInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		var cancelledAt time.Duration
		start := time.Now()
		store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
			func(ctx context.Context, _ expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
				time.AfterFunc(time.Second, stop) // SIGTERM while the batch waits on a lock
				<-ctx.Done()                      // a statement blocked for good
				cancelledAt = time.Since(start)
				return expiry.ExpireBatchResult{}, fmt.Errorf("canceling statement due to user request (SQLSTATE 57014): %w", ctx.Err())
			},
		}}
		h, reg := newCycle(t, store)
		res, err := h.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, StopTimeout: 2 * time.Second}))
		require.ErrorContains(t, err, "57014")
		require.ErrorContains(t, err, "stop timeout (2s)")
		require.Equal(t, 3*time.Second, cancelledAt, "one second to the stop, two more to its timeout")
		require.Zero(t, res.Batches, "the batch did not commit")
		require.Equal(t, 1.0, counter(t, reg, "promotion_expire_errors_total"))
	})
}

// A batch that ends before the stop timeout is not cancelled, and no timer
// outlives the cycle (synctest fails a bubble left with one).
func TestExpireCycleStopTimeoutSparesBatchThatFinishes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
			func(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
				stop()
				time.Sleep(1999 * time.Millisecond)
				return expiry.ExpireBatchResult{Selected: b.Limit}, ctx.Err()
			},
		}}
		h, _ := newCycle(t, store)
		res, err := h.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, MaxBatchesPerCycle: 0, StopTimeout: 2 * time.Second}))
		require.NoError(t, err)
		require.Equal(t, 1, res.Batches, "committed, and no batch after the stop")
	})
}

func TestPoisonRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit int
		n     uint64
		want  int
	}{
		{200, 0, 20}, {200, 1, 20}, {10, 0, 1}, {10, 7, 1}, {19, 0, 1}, {2, 0, 1},
		{1, 0, 0}, {1, 1, 1}, {1, 2, 0}, {1, 3, 1}, // a batch of one: every second batch
	} {
		require.Equal(t, tc.want, expiry.PoisonRetries(tc.limit, tc.n), "limit %d, batch %d", tc.limit, tc.n)
	}
}

// backlogStore is the selection's rule (sql/expire_select_batch.sql) over
// an in-memory backlog, for the cycle's side of it: a place of the limit
// kept for known poison while any is due and the batch may retry, due
// purchases in the rest, retries least recently tried first in the room
// they leave. Every retry fails again.
type backlogStore struct {
	scriptedStore
	due     int
	poison  []uuid.UUID // least recently tried first
	batches []expiry.ExpireBatchResult
}

func (s *backlogStore) ExpireBatch(_ context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
	poison := slices.DeleteFunc(slices.Clone(s.poison), func(id uuid.UUID) bool { return slices.Contains(b.Exclude, id) })
	kept := min(1, b.RetryPoison, len(poison))
	due := min(s.due, b.Limit-kept)
	s.due -= due
	res := expiry.ExpireBatchResult{Selected: due, KeptForPoison: kept}
	for _, id := range poison[:min(b.RetryPoison, b.Limit-due, len(poison))] {
		res.Selected++
		res.Retried++
		res.Failed = append(res.Failed, expiry.FailedExpiry{PurchaseID: id, Err: errors.New("no targets")})
		s.poison = append(slices.DeleteFunc(s.poison, func(p uuid.UUID) bool { return p == id }), id)
	}
	s.batches = append(s.batches, res)
	return res, nil
}

// Poison keeps a retry place inside the batch while a backlog fills every
// batch: with 3 known poison purchases and far more due than the cycles
// take, no batch holds more than BatchSize, each poison purchase is retried
// at least once every 3 cycles (every 6 with a batch of one), and the due
// purchases still move in every cycle but every second one at size 1.
func TestExpireCyclePoisonKeepsARetryPlaceInFullBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		batch, maxBatches, every int
	}{{10, 1, 3}, {200, 1, 3}, {10, 2, 2}, {1, 1, 6}} {
		t.Run(fmt.Sprintf("batch %d × %d", tc.batch, tc.maxBatches), func(t *testing.T) {
			t.Parallel()
			poison := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
			store := &backlogStore{due: 1_000_000, poison: slices.Clone(poison)}
			h, _ := newCycle(t, store)
			settings := promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: tc.batch, MaxBatchesPerCycle: tc.maxBatches})
			lastTried := map[uuid.UUID]int{}
			for cycle := 1; cycle <= 30; cycle++ {
				dueBefore := store.due
				res, err := h.Run(context.Background(), settings)
				require.NoError(t, err)
				require.Equal(t, tc.maxBatches, res.Batches, "cycle %d: the batches stay full", cycle)
				for _, f := range store.batches[len(store.batches)-res.Batches:] {
					require.LessOrEqual(t, f.Selected, tc.batch, "cycle %d", cycle)
					for _, failed := range f.Failed {
						lastTried[failed.PurchaseID] = cycle
					}
				}
				if tc.batch > 1 || cycle%2 == 1 {
					require.Less(t, store.due, dueBefore, "cycle %d: due purchases expired", cycle)
				}
				for _, id := range poison {
					require.Greater(t, lastTried[id], cycle-tc.every, "cycle %d: poison %s last tried in cycle %d", cycle, id, lastTried[id])
				}
			}
		})
	}
}

func TestRefusedAlike(t *testing.T) {
	t.Parallel()
	check := expiry.FailedExpiry{PurchaseID: uuid.New(), Err: errors.New("23514"), Refusal: "SQLSTATE 23514 on outbox.t, constraint c"}
	other := expiry.FailedExpiry{PurchaseID: uuid.New(), Err: errors.New("23505"), Refusal: "SQLSTATE 23505 on promotion.promotion_purchases, constraint u"}
	inGo := expiry.FailedExpiry{PurchaseID: uuid.New(), Err: errors.New("no targets")}
	for _, tc := range []struct {
		name    string
		tried   int
		refused []expiry.FailedExpiry
		fault   bool
	}{
		{"every row alike", 3, []expiry.FailedExpiry{check, check, check}, true},
		{"two alike", 2, []expiry.FailedExpiry{check, check}, true},
		{"one row cannot tell", 1, []expiry.FailedExpiry{check}, false},
		{"one row written", 3, []expiry.FailedExpiry{check, check}, false},
		{"two refusals", 2, []expiry.FailedExpiry{check, other}, false},
		{"not PostgreSQL's", 2, []expiry.FailedExpiry{inGo, inGo}, false},
		{"nothing refused", 2, nil, false},
	} {
		err := expiry.RefusedAlike(tc.tried, tc.refused)
		if !tc.fault {
			require.NoError(t, err, tc.name)
			continue
		}
		var alike *expiry.RefusedAlikeError
		require.ErrorAs(t, err, &alike, tc.name)
		require.Equal(t, tc.tried, alike.Rows)
		require.ErrorContains(t, err, check.Refusal)
		require.ErrorIs(t, err, check.Err, "the first row's error is kept")
	}
}
