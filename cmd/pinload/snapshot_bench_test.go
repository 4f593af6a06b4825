package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/testbed"
)

// Environment of BenchmarkSnapshotUnderLoad.
const (
	// snapshotPurchasesEnv overrides the Active purchases the snapshot
	// redelivers (default 10000).
	snapshotPurchasesEnv = "PIN_BENCH_SNAPSHOT_PURCHASES"
	// snapshotRateEnv overrides the snapshot's --rate (default 500).
	snapshotRateEnv = "PIN_BENCH_SNAPSHOT_RATE"
	// snapshotBatchEnv overrides the snapshot's --batch-size (default: the
	// command's own).
	snapshotBatchEnv = "PIN_BENCH_SNAPSHOT_BATCH_SIZE"
)

// snapshotAPIRate is the purchases per second the API takes while it is
// measured, with and without a snapshot running.
const snapshotAPIRate = 50

// snapshotWindowsEnv overrides how many windows of each kind (without and
// with a snapshot) BenchmarkSnapshotUnderLoad measures (default 48).
const snapshotWindowsEnv = "PIN_BENCH_SNAPSHOT_WINDOWS"

// snapshotWindow is how long one window is measured, after half a second
// that is not: the relay's drain of the previous window's events, or the
// snapshot's start.
const (
	snapshotWindow       = 4 * time.Second
	snapshotWindowWarmup = 500 * time.Millisecond
)

// BenchmarkSnapshotUnderLoad measures what `pin promotion snapshot` costs
// the service. It starts `pin serve` (kfake broker, expiry every minute,
// 400 due purchases to expire) on a fresh database holding 10k Active
// purchases, and offers the API 50 purchases/s from 4 clients throughout,
// unmeasured until the expiry has taken its due purchases.
//
// The load is measured in short windows, in turn without and with a
// snapshot running, in the order off, on, on, off, off, on, …: the noise of
// a shared machine comes and goes over tens of seconds, and a window of
// each kind side by side sees the same. In a window "on", `pin promotion
// snapshot --rate 500` runs; at its end the command is stopped (SIGINT,
// after the batch in flight commits) and the next window "on" resumes it
// with --snapshot-id; a snapshot that completes is followed by
// a new one. So the snapshot runs at its full rate over every Active
// purchase, as the issue asks, only cut into pieces.
//
// It reports the p99 of the windows without (api-p99-ms) and with
// (snapshot-api-p99-ms) the snapshot, each over about 9,600 requests, and
// their ratio api-p99-ratio (the target is at most 1.5); snapshot-events and
// snapshot-events-per-s (over the windows "on": about the rate); and
// expire-gap-s, the longest gap between two completed expiry cycles (its
// metric) from the first window "on" to a cycle after the last, against
// the interval (60 s: the job keeps its interval when the gap stays near
// it).
//
// Forty-eight windows of each kind, not fewer: a p99 over 2,400 requests
// (12 windows) is the 24 slowest of them, and a single stall of the shared
// machine moved it so much that the same code gave ratios from 0.96 to 1.60
// (docs/performance.md); over 9,600 requests two runs gave 1.39 and 1.41.
//
// Run it with -benchtime 1x and -timeout 30m: it takes about ten minutes at
// the defaults, and go test stops a test binary after ten.
func BenchmarkSnapshotUnderLoad(b *testing.B) {
	for range b.N {
		benchSnapshotUnderLoad(b)
	}
}

func benchSnapshotUnderLoad(b *testing.B) {
	ctx := context.Background()
	purchases := envInt(b, snapshotPurchasesEnv, 10000)
	rate := envInt(b, snapshotRateEnv, 500)
	windows := envInt(b, snapshotWindowsEnv, 48)
	db := testbed.NewDatabase(b)
	brokers := testbed.NewKafka(b, contract.Topic)
	srv := startServer(b, db.URL, brokers, "PIN_EXPIRE_INTERVAL=1m")
	pkg, err := createPackage(ctx, srv.baseURL, srv.issue(b, auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}))
	require.NoError(b, err)
	seedActivePurchases(b, db, pkg, purchases, 7*24*time.Hour)
	seedActivePurchases(b, db, pkg, 400, -time.Hour) // due: the expiry has work
	args := []string{"promotion", "snapshot", "--rate", strconv.Itoa(rate)}
	if os.Getenv(snapshotBatchEnv) != "" {
		args = append(args, "--batch-size", strconv.Itoa(envInt(b, snapshotBatchEnv, 0)))
	}
	load := loadConfig{
		BaseURL:     srv.baseURL,
		TenantToken: srv.issue(b, auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}),
		PackageID:   pkg,
		Clients:     4,
		Rate:        snapshotAPIRate,
		Duration:    snapshotWindow,
		Warmup:      snapshotWindowWarmup,
	}
	completions := &expiryWatch{}
	stopWatch := completions.start(b, srv.baseURL)
	defer stopWatch()

	// Warm up, unmeasured, until the expiry has taken the due purchases
	// (its next cycle, within the minute): the first requests after the
	// seeding and that one busy cycle would otherwise fall in one window.
	expired := func() int {
		var n int
		require.NoError(b, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Expired'`).Scan(&n))
		return n
	}
	for expired() < 400 {
		_, err := runLoad(ctx, load)
		require.NoError(b, err)
	}

	var without, with loadResult
	var resume snapshotResult // of the stopped run, to go on with
	var events, snapshots int
	var onTime time.Duration
	var firstOn, lastOn time.Time
	for i := range 2 * windows {
		if on := i%4 == 1 || i%4 == 2; !on {
			res, err := runLoad(ctx, load)
			require.NoError(b, err)
			without = without.merge(res)
			continue
		}
		run := startSnapshot(b, srv.bin, db.URL, append(slices.Clone(args), resume.resumeArgs()...))
		if firstOn.IsZero() {
			firstOn = run.start
		}
		res, err := runLoad(ctx, load)
		require.NoError(b, err)
		with = with.merge(res)
		got := run.stop(b)
		lastOn = time.Now()
		onTime += lastOn.Sub(run.start)
		events += got.Events
		if resume = got; got.Complete {
			snapshots++
			resume = snapshotResult{}
		}
	}
	b.Logf("API without a snapshot: %s", without.summary())
	b.Logf("API with a snapshot:    %s", with.summary())
	b.Logf("snapshot: %d events in %s of windows with it (%d snapshots completed) at --rate %d; load %s",
		events, onTime.Round(time.Millisecond), snapshots, rate, loadAverage())

	gap := completions.gapAround(b, firstOn, lastOn, 90*time.Second)
	b.Logf("expiry: longest gap between completed cycles around the snapshots %s (interval 1m; completions %v)",
		gap.Round(time.Millisecond), completions.seen)

	p99 := func(r loadResult) float64 { return ms(r.Percentile(99)) }
	b.ReportMetric(p99(without), "api-p99-ms")
	b.ReportMetric(p99(with), "snapshot-api-p99-ms")
	b.ReportMetric(p99(with)/p99(without), "api-p99-ratio")
	b.ReportMetric(float64(without.Errors+with.Errors), "api-errors")
	b.ReportMetric(float64(events), "snapshot-events")
	b.ReportMetric(float64(events)/onTime.Seconds(), "snapshot-events-per-s")
	b.ReportMetric(gap.Seconds(), "expire-gap-s")
}

// snapshotResult is the JSON line `pin promotion snapshot` prints.
type snapshotResult struct {
	SnapshotID string `json:"snapshotId"`
	Events     int    `json:"events"`
	After      string `json:"after"`
	Complete   bool   `json:"complete"`
}

// resumeArgs are the flags that go on with the stopped run r (its id: the
// snapshot stores its position); none when there is none.
func (r snapshotResult) resumeArgs() []string {
	if r.SnapshotID == "" {
		return nil
	}
	return []string{"--snapshot-id", r.SnapshotID}
}

// snapshotRun is one `pin promotion snapshot` process.
type snapshotRun struct {
	start       time.Time
	cmd         *exec.Cmd
	out, errOut bytes.Buffer
	exited      chan error
}

// startSnapshot starts `bin args...` against databaseURL.
func startSnapshot(tb testing.TB, bin, databaseURL string, args []string) *snapshotRun {
	tb.Helper()
	run := &snapshotRun{start: time.Now(), exited: make(chan error, 1)}
	run.cmd = exec.Command(bin, args...)
	run.cmd.Env = append(os.Environ(), "PIN_DATABASE_URL="+databaseURL)
	run.cmd.Stdout, run.cmd.Stderr = &run.out, &run.errOut
	require.NoError(tb, run.cmd.Start())
	go func() { run.exited <- run.cmd.Wait() }()
	return run
}

// stop interrupts the snapshot (a no-op when it has completed) and returns
// its result: complete, or stopped after its last committed batch.
func (r *snapshotRun) stop(tb testing.TB) snapshotResult {
	tb.Helper()
	_ = r.cmd.Process.Signal(os.Interrupt) // fails only when it has exited
	err := <-r.exited
	var res snapshotResult
	require.NoError(tb, json.Unmarshal([]byte(strings.TrimSpace(r.out.String())), &res),
		"pin promotion snapshot (%v): %s%s", err, r.out.String(), r.errOut.String())
	require.Equal(tb, res.Complete, err == nil, "a snapshot exits 0 exactly when complete: %v\n%s", err, r.errOut.String())
	return res
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(tb, err, name)
	require.Positive(tb, n, name)
	return n
}

// seedActivePurchases stores n Active purchases of pkg, one new project
// each, ending endsIn from now, in one statement: through the API they
// would take longer than the benchmark. Each keeps a messageId, as if
// published: a snapshot skips a purchase without one.
func seedActivePurchases(tb testing.TB, db *testbed.Database, pkg uuid.UUID, n int, endsIn time.Duration) {
	tb.Helper()
	ends := time.Now().Add(endsIn)
	_, err := db.SQL.Exec(`
		WITH pkg AS (
			SELECT p.id, p.code, p.kind, p.boost_weight, p.price_amount, p.currency_id, p.duration_days,
				c.iso_code, c.name AS currency_name, c.sign
			FROM promotion.promotion_packages p JOIN promotion.currencies c ON c.id = p.currency_id
			WHERE p.id = $1),
		added AS (
			INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
				boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign, status,
				payment_status, starts_at, ends_at, created_by_user_id, created_at, updated_at, version,
				last_event_id, last_event_at)
			SELECT gen_random_uuid(), gen_random_uuid(), pkg.id, pkg.code, pkg.kind, pkg.boost_weight,
				pkg.price_amount, pkg.currency_id, pkg.iso_code, pkg.currency_name, pkg.sign, 'Active', 'NotRequired',
				$3::timestamptz - make_interval(days => pkg.duration_days), $3::timestamptz, gen_random_uuid(), now(), now(), 1,
				gen_random_uuid(), now()
			FROM pkg, generate_series(1, $2)
			RETURNING id)
		INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
		SELECT id, 'Project', gen_random_uuid(), 0 FROM added`, pkg, n, ends)
	require.NoError(tb, err)
}

// expiryWatch records when the server's expiry cycles completed, as its
// promotion_expire_last_completed_timestamp_seconds metric says.
type expiryWatch struct {
	completed chan time.Time
	seen      []time.Time
}

// start scrapes baseURL every 2 s until the returned func is called. The
// metric holds the completion's own time, so scraping more often adds
// nothing but the scrapes' cost (the outbox gauges count rows) to what is
// measured.
func (w *expiryWatch) start(tb testing.TB, baseURL string) func() {
	tb.Helper()
	w.completed = make(chan time.Time, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var last float64
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if v, ok := scrapeGauge(ctx, baseURL, "promotion_expire_last_completed_timestamp_seconds"); ok && v > last {
				last = v
				w.completed <- time.Unix(0, int64(v*float64(time.Second)))
			}
		}
	}()
	return func() { cancel(); <-stopped }
}

// gapAround waits (at most wait) for a cycle completed after end and
// returns the longest gap between consecutive completions from the last
// one before start to the first one after end.
func (w *expiryWatch) gapAround(tb testing.TB, start, end time.Time, wait time.Duration) time.Duration {
	tb.Helper()
	deadline := time.After(wait)
	for len(w.seen) == 0 || !w.seen[len(w.seen)-1].After(end) {
		select {
		case t := <-w.completed:
			w.seen = append(w.seen, t)
		case <-deadline:
			tb.Fatalf("no expiry cycle completed within %s of the snapshot's end (completions: %v)", wait, w.seen)
		}
	}
	var gap time.Duration
	for i := 1; i < len(w.seen); i++ {
		if w.seen[i].After(start) {
			gap = max(gap, w.seen[i].Sub(w.seen[i-1]))
		}
	}
	return gap
}

// scrapeGauge reads one unlabelled sample from baseURL/metrics.
func scrapeGauge(ctx context.Context, baseURL, name string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			return v, err == nil
		}
	}
	return 0, false
}
