package expirebench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// batchSize is the job's default batch (PIN_EXPIRE_BATCH_SIZE).
var batchSize = promotiontest.ExpireSettings(expiry.ExpireSettings{}).BatchSize

// dueBacklog is how many purchases are due in every benchmark.
const dueBacklog = 10_000

// benchTraceparent stands in for the traceparent the Publisher injects.
const benchTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tableSizes are the purchases-table sizes of BenchmarkExpireBatch;
// PIN_BENCH_EXPIRE_SIZES (e.g. "10k,100k") narrows them.
func tableSizes(tb testing.TB) []int {
	tb.Helper()
	spec := os.Getenv("PIN_BENCH_EXPIRE_SIZES")
	if spec == "" {
		spec = "10k,100k,1M"
	}
	var sizes []int
	for _, s := range strings.Split(spec, ",") {
		n, err := parseCount(strings.TrimSpace(s))
		require.NoError(tb, err, "PIN_BENCH_EXPIRE_SIZES")
		require.GreaterOrEqual(tb, n, dueBacklog, "a table must hold the %d due purchases", dueBacklog)
		sizes = append(sizes, n)
	}
	return sizes
}

func parseCount(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1_000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1_000_000, strings.TrimSuffix(s, "M")
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, fmt.Errorf("count %q: %w", s, err)
	}
	return n * mult, nil
}

func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

// BenchmarkExpireBatch measures one expiry batch of 200 on tables of 10k,
// 100k and 1M purchases with 10k due, three ways, interleaved within every
// iteration (so that load from elsewhere on the machine hits all three
// alike; the order rotates):
//
//   - batch: the module's batch — adapters.ExpireRepository.ExpireBatch
//     with the domain transition, as the cycle calls it: lock with SKIP
//     LOCKED, load targets, count skipped-locked rows, transition and build
//     each event in Go, one set-based UPDATE, one outbox insert, commit;
//   - cycle: the whole cycle of one batch, expiry.ExpireCycle.Run
//     with MaxBatchesPerCycle 1 — what `pin expire-promotions --once` and the
//     runner do: the batch plus its logs, spans, metrics and the backlog
//     recount;
//   - bound: BoundSQL, the same lock/expire/outbox work as one statement.
//
// ns/op is the batch. Reported: batch-ms, cycle-ms, bound-ms (medians) and
// batch/bound, cycle/bound (ratios of the medians). Between runs the
// timer is stopped and the expired purchases are put back to Active (and
// the outbox emptied), so every run does the full work on the same rows.
func BenchmarkExpireBatch(b *testing.B) {
	for _, size := range tableSizes(b) {
		b.Run("purchases="+countLabel(size), func(b *testing.B) {
			// The table is built once here; the benchmark proper is the
			// nested one, which the testing package calls more than once.
			f := newFixture(b, size, dueBacklog)
			inst := newInstance(b, f.db.URL)
			b.Run(fmt.Sprintf("batch=%d", batchSize), func(b *testing.B) { benchBatch(b, f, inst) })
			if dir := os.Getenv(explainDirEnv); dir != "" {
				writePlans(b, f, filepath.Join(dir, "explain-expire-"+countLabel(size)+".txt"))
			}
		})
	}
}

// benchBatch is one size of BenchmarkExpireBatch.
func benchBatch(b *testing.B, f *fixture, inst *instance) {
	ctx := context.Background()
	runs := map[string]func(tb testing.TB){
		"batch": func(tb testing.TB) {
			asOf := time.Now().UTC().Truncate(time.Microsecond)
			res, err := inst.batches.ExpireBatch(ctx, expiry.ExpireBatch{
				AsOf: asOf, Limit: batchSize,
				Expire: func(p *domain.Purchase) error { return p.Expire(asOf) },
			})
			require.NoError(tb, err)
			require.Len(tb, res.Expired, batchSize)
		},
		"cycle": func(tb testing.TB) {
			res, err := inst.cycle.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batchSize, MaxBatchesPerCycle: 1}))
			require.NoError(tb, err)
			require.Equal(tb, batchSize, res.Expired)
		},
		"bound": func(tb testing.TB) {
			res, err := f.db.SQL.ExecContext(ctx, BoundSQL, time.Now().UTC().Truncate(time.Microsecond),
				batchSize, uuid.Must(uuid.NewV7()).String(), benchTraceparent)
			require.NoError(tb, err)
			n, err := res.RowsAffected()
			require.NoError(tb, err)
			require.EqualValues(tb, batchSize, n)
		},
	}
	order := []string{"batch", "cycle", "bound"}
	took := map[string][]time.Duration{}
	// Warm the pools, caches and plans outside the measurement.
	for _, name := range order {
		runs[name](b)
		f.restore(b)
	}
	f.vacuum(b)

	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		for j := range order {
			name := order[(i+j)%len(order)]
			started := time.Now()
			if name == "batch" {
				b.StartTimer()
			}
			runs[name](b)
			if name == "batch" {
				b.StopTimer()
			}
			took[name] = append(took[name], time.Since(started))
			f.restore(b)
		}
		if i%10 == 9 {
			f.vacuum(b)
		}
	}
	batch, cycle, bound := median(took["batch"]), median(took["cycle"]), median(took["bound"])
	b.ReportMetric(ms(batch), "batch-ms")
	b.ReportMetric(ms(cycle), "cycle-ms")
	b.ReportMetric(ms(bound), "bound-ms")
	b.ReportMetric(float64(batch)/float64(bound), "batch/bound")
	b.ReportMetric(float64(cycle)/float64(bound), "cycle/bound")
}

// BenchmarkExpireDrain drains a backlog of 10k due purchases with
// MaxBatchesPerCycle unlimited (0), by one instance and by two instances
// running cycles at once (each its own pool, repository and handler, as two
// `pin serve` replicas), interleaved within every iteration. An instance
// runs cycles until one expires nothing. After every drain it checks that
// every purchase was expired exactly once: 10k Expired at version 2, none
// due, and exactly one Expired event in the outbox per purchase.
//
// For reference it also drains the same backlog with BoundSQL in a loop (one
// statement per batch of 200, until nothing is due): what this machine's
// PostgreSQL allows one client at most. And it drains the shared reference
// bound's backlog (form1.sql, 10k purchases all due, a database of its own)
// with one worker and with two at once: how much a second worker gains on
// this machine when the client does no work at all, the ceiling for the
// module's 2-vs-1.
//
// Reported: 1-instance-purchases/s, 2-instances-purchases/s,
// bound-purchases/s, reference-1-worker-purchases/s,
// reference-2-workers-purchases/s (medians), 2-vs-1, reference-2-vs-1 and
// 2-vs-1/reference; ns/op is one iteration (all five drains, without the
// resets).
func BenchmarkExpireDrain(b *testing.B) {
	// Built once; the nested benchmark is called more than once.
	f := newFixture(b, dueBacklog, dueBacklog)
	ref := newReference(b, referenceDir(b), dueBacklog, dueBacklog)
	instances := []*instance{newInstance(b, f.db.URL), newInstance(b, f.db.URL)}
	b.Run("backlog="+countLabel(dueBacklog), func(b *testing.B) { benchDrain(b, f, ref, instances) })
}

// benchDrain is BenchmarkExpireDrain on its table.
func benchDrain(b *testing.B, f *fixture, ref *reference, instances []*instance) {
	ctx := context.Background()
	cmd := promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batchSize, MaxBatchesPerCycle: 0})

	// instancesDrain runs n instances until the backlog is gone and returns
	// the time it took.
	instancesDrain := func(n int) func(testing.TB) time.Duration {
		return func(tb testing.TB) time.Duration {
			tb.Helper()
			var wg sync.WaitGroup
			errs := make([]error, n)
			started := time.Now()
			for i, inst := range instances[:n] {
				wg.Go(func() {
					for {
						res, err := inst.cycle.Run(ctx, cmd)
						if err != nil || res.Expired == 0 {
							errs[i] = err
							return
						}
					}
				})
			}
			wg.Wait()
			took := time.Since(started)
			require.NoError(tb, errors.Join(errs...))
			return took
		}
	}
	boundDrain := func(tb testing.TB) time.Duration {
		tb.Helper()
		started := time.Now()
		for {
			res, err := f.db.SQL.ExecContext(ctx, BoundSQL, time.Now().UTC().Truncate(time.Microsecond),
				batchSize, uuid.Must(uuid.NewV7()).String(), benchTraceparent)
			require.NoError(tb, err)
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				require.NoError(tb, err)
				return time.Since(started)
			}
		}
	}
	referenceDrain := func(workers int) func(testing.TB) time.Duration {
		return func(tb testing.TB) time.Duration {
			took, _ := ref.drainBy(tb, workers)
			return took
		}
	}
	resetModule := func(tb testing.TB) { f.restoreAll(tb) }
	checkModule := func(tb testing.TB) { f.requireExpiredOnce(tb, dueBacklog) }
	resetReference := func(tb testing.TB) { ref.run(tb, "reset.sql") }
	checkReference := func(tb testing.TB) { ref.requireExpiredOnce(tb, dueBacklog) }

	// Each drain starts from its side's reset table and is checked after.
	drains := map[string]struct {
		reset, check func(testing.TB)
		drain        func(testing.TB) time.Duration
	}{
		"1 instance":           {resetModule, checkModule, instancesDrain(1)},
		"2 instances":          {resetModule, checkModule, instancesDrain(2)},
		"bound":                {resetModule, checkModule, boundDrain},
		"reference, 1 worker":  {resetReference, checkReference, referenceDrain(1)},
		"reference, 2 workers": {resetReference, checkReference, referenceDrain(2)},
	}
	orders := [][]string{
		{"1 instance", "reference, 1 worker", "2 instances", "reference, 2 workers", "bound"},
		{"bound", "reference, 2 workers", "2 instances", "reference, 1 worker", "1 instance"},
	}

	resetModule(b)
	instancesDrain(1)(b) // warm up
	checkModule(b)
	took := map[string][]time.Duration{}
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		for _, name := range orders[i%2] {
			d := drains[name]
			d.reset(b)
			b.StartTimer()
			took[name] = append(took[name], d.drain(b))
			b.StopTimer()
			d.check(b)
		}
	}
	rate := func(name string) float64 { return float64(dueBacklog) / median(took[name]).Seconds() }
	one, two := rate("1 instance"), rate("2 instances")
	refOne, refTwo := rate("reference, 1 worker"), rate("reference, 2 workers")
	b.ReportMetric(one, "1-instance-purchases/s")
	b.ReportMetric(two, "2-instances-purchases/s")
	b.ReportMetric(rate("bound"), "bound-purchases/s")
	b.ReportMetric(refOne, "reference-1-worker-purchases/s")
	b.ReportMetric(refTwo, "reference-2-workers-purchases/s")
	b.ReportMetric(two/one, "2-vs-1")
	b.ReportMetric(refTwo/refOne, "reference-2-vs-1")
	b.ReportMetric((two/one)/(refTwo/refOne), "2-vs-1/reference")
}

// restoreAll puts every due purchase back to Active and empties the
// outbox, then vacuums, so that each drain starts from the same table.
func (f *fixture) restoreAll(tb testing.TB) {
	tb.Helper()
	f.exec(tb, `UPDATE promotion.promotion_purchases
	SET status = 'Active', version = 1, updated_at = starts_at, updated_by_user_id = NULL
	WHERE status = 'Expired' AND ends_at <= $1 AND ends_at > $1 - interval '1 day'`, f.asOf)
	f.exec(tb, `TRUNCATE `+outboxTable)
	f.vacuum(tb)
	require.Equal(tb, f.due, f.countDue(tb))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
