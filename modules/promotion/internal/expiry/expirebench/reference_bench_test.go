package expirebench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/testbed"
)

// referenceDirEnv names the folder of the shared reference bound; by
// default it is shared/bench/expiry-bound beside the repository.
const referenceDirEnv = "PIN_BENCH_REFERENCE_DIR"

// referenceDir finds the reference bound's folder and fails tb with what
// to do when it is missing.
func referenceDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(referenceDirEnv)
	if dir == "" {
		root, err := repoRoot()
		require.NoError(tb, err)
		dir = filepath.Join(root, "..", "shared", "bench", "expiry-bound")
	}
	for _, name := range []string{"schema.sql", "seed.sql", "form1.sql", "reset.sql", "verify.sql"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			tb.Fatalf("the reference bound is missing: %v. Put shared/ beside the repository "+
				"(../shared/bench/expiry-bound) or set %s to its folder.", err, referenceDirEnv)
		}
	}
	return dir
}

// repoRoot is the nearest folder above the working directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// reference is the shared reference bound seeded in a database of its own
// (a fresh testbed database, dropped when the benchmark ends, whose
// schema.sql replaces the migrated promotion schema by the model one).
type reference struct {
	db    *testbed.Database
	dir   string
	psql  string
	form1 string
}

func newReference(tb testing.TB, dir string, total, due int) *reference {
	tb.Helper()
	r := &reference{db: testbed.NewDatabase(tb), dir: dir,
		psql: testbed.Tool(tb, "psql", "apt-get install postgresql-client")}
	form1, err := os.ReadFile(filepath.Join(r.dir, "form1.sql"))
	require.NoError(tb, err)
	r.form1 = string(form1)
	started := time.Now()
	r.run(tb, "schema.sql")
	r.run(tb, "seed.sql", "-v", fmt.Sprintf("n_total=%d", total), "-v", fmt.Sprintf("n_due=%d", due))
	tb.Logf("reference: seeded %d purchases (%d due) in %s", total, due, time.Since(started).Round(time.Millisecond))
	return r
}

// run runs one of the reference's files with psql (they use psql variables).
func (r *reference) run(tb testing.TB, file string, args ...string) {
	tb.Helper()
	args = append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", r.db.URL, "-f", filepath.Join(r.dir, file)}, args...)
	out, err := exec.Command(r.psql, args...).CombinedOutput()
	require.NoError(tb, err, "psql -f %s: %s", file, out)
}

// drainBy runs form1.sql on n connections at once, each until it expires
// nothing, and returns the time until the last one stopped and the batches
// that expired rows.
func (r *reference) drainBy(tb testing.TB, n int) (time.Duration, int) {
	tb.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := r.db.SQL.Conn(ctx)
		require.NoError(tb, err)
		defer func() { _ = c.Close() }()
		conns[i] = c
	}
	errs := make([]error, n)
	var batches atomic.Int64
	var wg sync.WaitGroup
	started := time.Now()
	for i, c := range conns {
		wg.Go(func() {
			for {
				var expired int
				if errs[i] = c.QueryRowContext(ctx, r.form1).Scan(&expired); errs[i] != nil || expired == 0 {
					return
				}
				batches.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(started)
	require.NoError(tb, errors.Join(errs...))
	return took, int(batches.Load())
}

// requireExpiredOnce runs verify.sql's query: every due row expired once,
// one outbox row each, nothing else expired.
func (r *reference) requireExpiredOnce(tb testing.TB, want int) {
	tb.Helper()
	q, err := os.ReadFile(filepath.Join(r.dir, "verify.sql"))
	require.NoError(tb, err)
	var due, expired, twice, wrong, outbox, distinct, txns, payload int
	require.NoError(tb, r.db.SQL.QueryRow(string(q)).Scan(&due, &expired, &twice, &wrong, &outbox, &distinct, &txns, &payload))
	require.Equal(tb, want, due, "reference: due rows")
	require.Equal(tb, want, expired, "reference: expired at version 2")
	require.Zero(tb, twice, "reference: expired twice")
	require.Zero(tb, wrong, "reference: wrongly expired")
	require.Equal(tb, want, outbox, "reference: outbox rows")
	require.Equal(tb, want, distinct, "reference: purchases with an outbox row")
}

// BenchmarkExpireReference drains 10k due purchases from tables of 10k,
// 100k and 1M purchases (PIN_BENCH_EXPIRE_SIZES) two ways, interleaved
// (the order alternates every iteration): the module, one instance running
// cycles with MaxBatchesPerCycle 0 until one expires nothing, as the runner
// does; and the shared reference bound (form1.sql, one statement per batch
// of 200) on its model schema in a database of its own. Before every
// drain its side is reset and a CHECKPOINT taken, as reset.sql does, so
// that both start from vacuumed tables and first-touch pages. Each drain
// is checked: every due purchase expired once with one outbox row.
//
// Reported (medians): module-ms/batch, reference-ms/batch and
// module/reference, the ratio the target is set against; ns/op is
// one iteration, both drains with their resets.
func BenchmarkExpireReference(b *testing.B) {
	dir := referenceDir(b)
	for _, size := range tableSizes(b) {
		b.Run("purchases="+countLabel(size), func(b *testing.B) {
			f := newFixture(b, size, dueBacklog)
			ref := newReference(b, dir, size, dueBacklog)
			inst := newInstance(b, f.db.URL)
			b.Run(fmt.Sprintf("batch=%d", batchSize), func(b *testing.B) { benchReference(b, f, ref, inst) })
		})
	}
}

func benchReference(b *testing.B, f *fixture, ref *reference, inst *instance) {
	ctx := context.Background()
	cmd := promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batchSize, MaxBatchesPerCycle: 0})
	module := func(tb testing.TB) time.Duration {
		f.restoreAll(tb)
		f.exec(tb, `CHECKPOINT`)
		started := time.Now()
		for {
			res, err := inst.cycle.Run(ctx, cmd)
			require.NoError(tb, err)
			if res.Expired == 0 {
				took := time.Since(started)
				f.requireExpiredOnce(tb, dueBacklog)
				return took
			}
		}
	}
	reference := func(tb testing.TB) time.Duration {
		ref.run(tb, "reset.sql")
		took, batches := ref.drainBy(tb, 1)
		require.Equal(tb, (dueBacklog+batchSize-1)/batchSize, batches, "reference batches")
		ref.requireExpiredOnce(tb, dueBacklog)
		return took
	}
	mod, refs := interleave(b, module, reference)
	batches := float64((dueBacklog + batchSize - 1) / batchSize)
	m, r := ms(median(mod))/batches, ms(median(refs))/batches
	b.ReportMetric(m, "module-ms/batch")
	b.ReportMetric(r, "reference-ms/batch")
	b.ReportMetric(m/r, "module/reference")
}

// pinBinaryEnv names a pin binary (scripts/bench.sh builds one into
// .bench/); without it BenchmarkExpireReferenceOnce builds ./cmd/pin.
const pinBinaryEnv = "PIN_BENCH_PIN_BINARY"

// pinBinary is the binary PIN_BENCH_PIN_BINARY names, else one built from
// ./cmd/pin into a temporary directory.
func pinBinary(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv(pinBinaryEnv); bin != "" {
		return bin
	}
	bin := filepath.Join(tb.TempDir(), "pin")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/pinmarket/pin/cmd/pin").CombinedOutput()
	require.NoError(tb, err, "go build ./cmd/pin: %s", out)
	return bin
}

// BenchmarkExpireReferenceOnce measures the last batch of 200 due
// purchases in a fresh process, as an operator waits for it: `pin
// expire-promotions --once --batch-size 200` against one psql process
// running form1.sql, interleaved, on 10k purchases. Before each, the same
// side is reset and drained down to 200 due in-process, then CHECKPOINT.
// Both processes connect, plan and run their statements from cold; pin
// also loads its configuration and builds its module.
//
// Reported (medians of wall time, process start to exit): once-ms,
// reference-once-ms and once/reference.
func BenchmarkExpireReferenceOnce(b *testing.B) {
	dir := referenceDir(b)
	f := newFixture(b, dueBacklog, dueBacklog)
	ref := newReference(b, dir, dueBacklog, dueBacklog)
	inst := newInstance(b, f.db.URL)
	bin := pinBinary(b)
	ctx := context.Background()
	lastBatches := (dueBacklog - batchSize) / batchSize
	module := func(tb testing.TB) time.Duration {
		f.restoreAll(tb)
		res, err := inst.cycle.Run(ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batchSize, MaxBatchesPerCycle: lastBatches}))
		require.NoError(tb, err)
		require.Equal(tb, dueBacklog-batchSize, res.Expired)
		f.exec(tb, `CHECKPOINT`)
		cmd := exec.Command(bin, "expire-promotions", "--once", "--batch-size", fmt.Sprint(batchSize))
		cmd.Env = append(os.Environ(), "PIN_DATABASE_URL="+f.db.URL, "PIN_KAFKA_BROKERS=127.0.0.1:9",
			"PIN_AUTH_JWT_SECRET=benchmark-secret-benchmark-secret-0123456789")
		started := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(started)
		require.NoError(tb, err, "pin expire-promotions --once: %s", out)
		f.requireExpiredOnce(tb, dueBacklog)
		return took
	}
	reference := func(tb testing.TB) time.Duration {
		ref.run(tb, "reset.sql")
		for range lastBatches {
			var n int
			require.NoError(tb, ref.db.SQL.QueryRowContext(ctx, ref.form1).Scan(&n))
		}
		_, err := ref.db.SQL.ExecContext(ctx, `CHECKPOINT`)
		require.NoError(tb, err)
		started := time.Now()
		ref.run(tb, "form1.sql")
		took := time.Since(started)
		ref.requireExpiredOnce(tb, dueBacklog)
		return took
	}
	mod, refs := interleave(b, module, reference)
	m, r := ms(median(mod)), ms(median(refs))
	b.ReportMetric(m, "once-ms")
	b.ReportMetric(r, "reference-once-ms")
	b.ReportMetric(m/r, "once/reference")
}

// interleave runs module and reference once each to warm caches, pools and
// plans, then b.N times each, alternating which goes first, and returns
// their durations.
func interleave(b *testing.B, module, reference func(testing.TB) time.Duration) (mod, refs []time.Duration) {
	b.Helper()
	module(b)
	reference(b)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			mod = append(mod, module(b))
			refs = append(refs, reference(b))
		} else {
			refs = append(refs, reference(b))
			mod = append(mod, module(b))
		}
	}
	return mod, refs
}
