package expiry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// scriptedStore plays back one scripted outcome per batch. It stands in for
// the database only in these tests of the cycle's own logic (how many
// batches, which context, what is counted); the adapters' tests run the
// cycle against PostgreSQL.
type scriptedStore struct {
	mu      sync.Mutex
	batches []expiry.ExpireBatch
	ctxErrs []error
	script  []func(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error)
	backlog expiry.ExpireBacklog
	// countErr and recordErr fail CountBacklog and RecordCycle.
	countErr, recordErr error
	counted             int
	records             []recorded
}

// recorded is one RecordCycle call.
type recorded struct {
	cycle expiry.ExpireCycleResult
	err   error
}

func (s *scriptedStore) ExpireBatch(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
	s.mu.Lock()
	i := len(s.batches)
	s.batches = append(s.batches, b)
	step := s.script[min(i, len(s.script)-1)]
	s.mu.Unlock()
	res, err := step(ctx, b)
	s.mu.Lock()
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	s.mu.Unlock()
	return res, err
}

func (s *scriptedStore) CountBacklog(context.Context, time.Time) (expiry.ExpireBacklog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counted++
	return s.backlog, s.countErr
}

func (s *scriptedStore) RecordCycle(_ context.Context, c expiry.ExpireCycleResult, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, recorded{c, err})
	return s.recordErr
}

// full returns a batch outcome of b.Limit rows, after taking d.
func full(d time.Duration) func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
	return func(_ context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
		time.Sleep(d) // the batch's work
		return expiry.ExpireBatchResult{Selected: b.Limit}, nil
	}
}

func partial(n int) func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
	return func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
		return expiry.ExpireBatchResult{Selected: n}, nil
	}
}

// newCycle builds the cycle on store with the telemetry production uses,
// whose metrics it exports on the registry returned.
func newCycle(tb testing.TB, store expiry.ExpireStore) (*expiry.ExpireCycle, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	return promotiontest.ExpireCycle(tb, store, telemetry.ExpireTelemetryDeps{Registerer: reg}), reg
}

func TestExpireCycleDefaults(t *testing.T) {
	t.Parallel()
	store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){partial(0)}}
	h, _ := newCycle(t, store)
	res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{}))
	require.NoError(t, err)
	require.Len(t, store.batches, 1)
	require.Equal(t, promotiontest.ExpireSettings(expiry.ExpireSettings{}).BatchSize, store.batches[0].Limit)
	require.Equal(t, res.AsOf, store.batches[0].AsOf)
	require.Equal(t, time.UTC, res.AsOf.Location())
	require.Equal(t, res.AsOf, res.AsOf.Truncate(time.Microsecond))
	require.NotEqual(t, uuid.Nil, res.RunID)
}

// A cycle takes further batches only while the last one was full and the
// limit allows.
func TestExpireCycleBatchLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		maxBatches int
		script     []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error)
		want       int
	}{
		{"one batch", 1, []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){full(0)}, 1},
		{"three batches", 3, []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){full(0)}, 3},
		{"unlimited until a partial batch", 0, []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){full(0), full(0), full(0), partial(3)}, 4},
		{"a partial batch ends the cycle", 5, []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){partial(9)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &scriptedStore{script: tc.script}
			h, _ := newCycle(t, store)
			res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, MaxBatchesPerCycle: tc.maxBatches}))
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Batches)
			require.Len(t, store.batches, tc.want)
		})
	}
}

// No batch starts when the budget left is less than the last batch's
// duration; no batch runs under the budget's deadline. The batches' 60 ms
// pass on synctest's clock, so the count is exact.
func TestExpireCycleBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget time.Duration
		want   int
	}{
		{150 * time.Millisecond, 2}, // 90 ms left after one batch, then 30: less than 60
		{250 * time.Millisecond, 4}, // 190, 130, 70 ms left: enough; 10 ms after the fourth
	} {
		t.Run(tc.budget.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
					func(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
						_, ok := ctx.Deadline()
						require.False(t, ok, "the budget does not cut a batch")
						return full(60*time.Millisecond)(ctx, b)
					},
				}}
				h, _ := newCycle(t, store)
				res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, CycleBudget: tc.budget}))
				require.NoError(t, err)
				require.Equal(t, tc.want, res.Batches)
			})
		})
	}
}

// Stopping (ctx cancelled) during a batch lets that batch finish with a live
// context, and starts no further batch.
func TestExpireCycleStopFinishesBatchInFlight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
		func(_ context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
			cancel() // SIGTERM arrives mid-batch
			return expiry.ExpireBatchResult{Selected: b.Limit}, nil
		},
	}}
	h, _ := newCycle(t, store)
	res, err := h.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, MaxBatchesPerCycle: 0}))
	require.NoError(t, err)
	require.Equal(t, 1, res.Batches, "no batch after the stop")
	require.NoError(t, store.ctxErrs[0], "the batch in flight was not cancelled")
}

// An infrastructure error ends the cycle with the counts of the batches
// committed before it, and is counted.
func TestExpireCycleInfrastructureError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
		func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
			return expiry.ExpireBatchResult{Selected: 2, SkippedLocked: 1, Failed: []expiry.FailedExpiry{{PurchaseID: uuid.New(), Err: boom}}}, nil
		},
		func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
			return expiry.ExpireBatchResult{}, boom
		},
	}}
	h, reg := newCycle(t, store)
	res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 2, MaxBatchesPerCycle: 0}))
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, res.Batches)
	require.Equal(t, 1, res.Failed)
	require.Equal(t, 1, res.SkippedLocked)
	require.Equal(t, 2.0, counter(t, reg, "promotion_expire_errors_total"), "one poison item, one failed cycle")
	require.Equal(t, 1.0, counter(t, reg, "promotion_expire_run_total"))
	require.Equal(t, 1.0, counter(t, reg, "promotion_expire_skip_locked_total"))
}

// Items that failed in a batch are excluded from the cycle's later batches.
func TestExpireCycleExcludesFailedItems(t *testing.T) {
	t.Parallel()
	poison := uuid.New()
	store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
		func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
			return expiry.ExpireBatchResult{Selected: 1, Failed: []expiry.FailedExpiry{{PurchaseID: poison, Err: errors.New("no targets")}}}, nil
		},
		partial(0),
	}}
	h, _ := newCycle(t, store)
	res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 1, MaxBatchesPerCycle: 0}))
	require.NoError(t, err)
	require.Equal(t, 2, res.Batches)
	require.Empty(t, store.batches[0].Exclude)
	require.Equal(t, []uuid.UUID{poison}, store.batches[1].Exclude)
}

// A purchase that lost a version race (Superseded) is counted with the
// skipped ones, not as an error or a failed item, and is excluded from the
// cycle's later batches.
func TestExpireCycleCountsSupersededWithSkipped(t *testing.T) {
	t.Parallel()
	lost := uuid.New()
	store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
		func(_ context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
			return expiry.ExpireBatchResult{Selected: b.Limit, Superseded: []expiry.SupersededExpiry{{PurchaseID: lost, Status: domain.StatusCancelled, Version: 2}}}, nil
		},
		partial(0),
	}}
	h, reg := newCycle(t, store)
	res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 1, MaxBatchesPerCycle: 0}))
	require.NoError(t, err)
	require.Equal(t, 1, res.SkippedLocked)
	require.Zero(t, res.Failed)
	require.Equal(t, []uuid.UUID{lost}, store.batches[1].Exclude)
	require.Equal(t, 0.0, counter(t, reg, "promotion_expire_errors_total"))
	require.Equal(t, 1.0, counter(t, reg, "promotion_expire_skip_locked_total"))
}

// The cycle itself, not a telemetry callback, counts what it left and
// records itself, once, after its batches: the gauges show that count
// (poison apart from the due work); a cycle whose batch failed counts
// nothing and is recorded with its error; a failed count or record fails
// the cycle.
func TestExpireCycleCountsAndRecordsItself(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	for _, tc := range []struct {
		name                 string
		batchErr, countErr   error
		recordErr            error
		wantCounted          int
		wantErr, wantRecErr  bool
		wantBacklog, wantPsn float64
	}{
		{name: "completed", wantCounted: 1, wantBacklog: 7, wantPsn: 2},
		{name: "batch failed", batchErr: boom, wantErr: true, wantRecErr: true},
		{name: "count failed", countErr: boom, wantCounted: 1, wantErr: true, wantRecErr: true},
		{name: "record failed", recordErr: boom, wantCounted: 1, wantErr: true, wantBacklog: 7, wantPsn: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &scriptedStore{
				script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
					func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
						return expiry.ExpireBatchResult{Selected: 3}, tc.batchErr
					},
				},
				backlog:  expiry.ExpireBacklog{Due: 7, Poison: 2},
				countErr: tc.countErr, recordErr: tc.recordErr,
			}
			h, reg := newCycle(t, store)
			res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10}))
			if tc.wantErr {
				require.ErrorIs(t, err, boom)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantCounted, store.counted)
			require.Len(t, store.records, 1)
			require.Equal(t, res, store.records[0].cycle)
			require.Equal(t, tc.wantRecErr, store.records[0].err != nil)
			require.Equal(t, tc.wantBacklog, gauge(t, reg, "promotion_expire_backlog"))
			require.Equal(t, tc.wantPsn, gauge(t, reg, "promotion_expire_poison_purchases"))
		})
	}
}

// gauge returns the value of an unlabelled gauge in reg.
func gauge(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	tb.Fatalf("gauge %s not found", name)
	return 0
}

// counter returns the value of an unlabelled counter in reg.
func counter(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	tb.Fatalf("counter %s not found", name)
	return 0
}

// Defaults are applied once, where the job is built: a cycle refuses
// settings without a batch size or a budget rather than filling them in.
func TestExpireCycleRefusesSettingsWithoutDefaults(t *testing.T) {
	t.Parallel()
	h, _ := newCycle(t, &scriptedStore{})
	_, err := h.Run(context.Background(), expiry.ExpireSettings{BatchSize: 10})
	require.ErrorContains(t, err, "must be positive")
	_, err = h.Run(context.Background(), expiry.ExpireSettings{CycleBudget: time.Second})
	require.ErrorContains(t, err, "must be positive")
}

// The budget stops new batches; it does not kill one: a batch
// that takes twice the budget runs to its end with a live context, its
// counts are the cycle's, and no further batch starts. On synctest's clock
// the batch's 2 s pass exactly, past the 1 s budget.
func TestExpireCycleBatchSlowerThanBudgetCommits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &scriptedStore{script: []func(context.Context, expiry.ExpireBatch) (expiry.ExpireBatchResult, error){
			func(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireBatchResult, error) {
				time.Sleep(2 * time.Second) // the batch's work, past the budget
				if err := ctx.Err(); err != nil {
					return expiry.ExpireBatchResult{}, err // the store's commit would fail the same way
				}
				return expiry.ExpireBatchResult{Selected: b.Limit, Expired: make([]*domain.Purchase, 0)}, nil
			},
		}}
		h, reg := newCycle(t, store)
		res, err := h.Run(context.Background(), promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: 10, MaxBatchesPerCycle: 0, CycleBudget: time.Second}))
		require.NoError(t, err, "the batch in flight commits")
		require.Equal(t, 1, res.Batches, "the budget is spent: no new batch")
		require.Len(t, store.batches, 1)
		require.NoError(t, store.ctxErrs[0], "the budget did not cancel the batch in flight")
		require.Equal(t, 2*time.Second, res.Duration)
		require.Equal(t, 0.0, counter(t, reg, "promotion_expire_errors_total"))
	})
}
