package expirebench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// largestBatch is PIN_EXPIRE_BATCH_SIZE's largest allowed value.
const largestBatch = 10_000

// BenchmarkExpireBatchBound measures one batch of the default size and of
// the largest allowed one (10 000 due on a table of 20 000) step by step,
// against the bounds the batch runs under (ADR 0014): its selection and
// each of its writes (one per adapters.ExpireWriteChunk purchases) are
// statements under its 6 s statement_timeout; the events built in between
// are time its session waits under its 5 s idle bound. Run it with the
// machine loaded (docs/performance.md). Reported, over the runs: the median
// and the slowest batch (batch-ms, max-batch-ms), the slowest selection,
// build and write statement (max-select-ms, max-build-ms, max-write-ms).
func BenchmarkExpireBatchBound(b *testing.B) {
	for _, size := range []int{batchSize, largestBatch} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			f := newFixture(b, 2*largestBatch, largestBatch)
			inst := newInstance(b, f.db.URL)
			benchBatchBound(b, f, inst, size)
		})
	}
}

func benchBatchBound(b *testing.B, f *fixture, inst *instance, size int) {
	steps := &stepTimes{}
	batches := promotiontest.ExpireBatches(b, timedStorage{ExpireBatchStorage: inst.store, steps: steps})
	ctx := context.Background()
	batch := func(tb testing.TB) {
		asOf := time.Now().UTC().Truncate(time.Microsecond)
		res, err := batches.ExpireBatch(ctx, expiry.ExpireBatch{
			AsOf: asOf, Limit: size,
			Expire: func(p *domain.Purchase) error { return p.Expire(asOf) },
		})
		require.NoError(tb, err)
		require.Len(tb, res.Expired, size)
	}
	batch(b) // warm the pool, caches and plans
	f.restore(b)
	f.vacuum(b)
	*steps = stepTimes{}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		started := time.Now()
		batch(b)
		took = append(took, time.Since(started))
		b.StopTimer()
		f.restore(b)
		f.vacuum(b)
		b.StartTimer()
	}
	b.ReportMetric(ms(median(took)), "batch-ms")
	b.ReportMetric(ms(slices.Max(took)), "max-batch-ms")
	b.ReportMetric(ms(slices.Max(steps.selects)), "max-select-ms")
	b.ReportMetric(ms(slices.Max(steps.prepares)), "max-build-ms")
	b.ReportMetric(ms(slices.Max(steps.writes)), "max-write-ms")
	b.Logf("batches %v", took)
}

// stepTimes are the durations of batches' steps: one selection and one
// build per batch, a write per statement.
type stepTimes struct{ selects, prepares, writes []time.Duration }

// timedStorage is the expiry's storage with its transaction's steps timed.
type timedStorage struct {
	expiry.ExpireBatchStorage
	steps *stepTimes
}

func (s timedStorage) InBatch(ctx context.Context, fn func(expiry.ExpireTx) error) error {
	return s.ExpireBatchStorage.InBatch(ctx, func(tx expiry.ExpireTx) error { return fn(timedTx{ExpireTx: tx, steps: s.steps}) })
}

// timedTx times Select, Prepare and each statement of WriteAll: it hands
// WriteAll the chunks it would write by one statement each, one at a time.
type timedTx struct {
	expiry.ExpireTx
	steps *stepTimes
}

func (t timedTx) Select(ctx context.Context, b expiry.ExpireBatch) (expiry.ExpireSelection, error) {
	defer t.time(&t.steps.selects, time.Now())
	return t.ExpireTx.Select(ctx, b)
}

func (t timedTx) Prepare(ctx context.Context, es []expiry.Expiry) ([]expiry.Expiry, []expiry.FailedExpiry) {
	defer t.time(&t.steps.prepares, time.Now())
	return t.ExpireTx.Prepare(ctx, es)
}

func (t timedTx) WriteAll(ctx context.Context, es []expiry.Expiry, forgetPoison bool) ([]expiry.Expiry, error) {
	var unwritten []expiry.Expiry
	for chunk := range slices.Chunk(es, adapters.ExpireWriteChunk) {
		started := time.Now()
		u, err := t.ExpireTx.WriteAll(ctx, chunk, forgetPoison)
		t.time(&t.steps.writes, started)
		if err != nil {
			return nil, err
		}
		unwritten = append(unwritten, u...)
	}
	return unwritten, nil
}

func (t timedTx) time(into *[]time.Duration, started time.Time) {
	*into = append(*into, time.Since(started))
}
