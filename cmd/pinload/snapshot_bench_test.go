package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
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
	// republishes (default 10000).
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

// BenchmarkSnapshotUnderLoad measures what `pin promotion snapshot` costs
// the service. It starts `pin serve` (kfake broker, expiry every minute,
// 400 due purchases to expire) on a fresh database holding 10k Active
// purchases, then:
//
//  1. offers the API 50 purchases/s from 4 clients for as long as the
//     snapshot will take (Active purchases ÷ rate), without a snapshot:
//     api-p99-ms;
//  2. offers the same load while `pin promotion snapshot --rate 500`
//     republishes every Active purchase: snapshot-api-p99-ms, and their
//     ratio api-p99-ratio (the target is at most 1.5), snapshot-s and
//     snapshot-events (about the Active purchases: the API adds some
//     meanwhile and the expiry takes some away);
//  3. watches the expiry's last completed cycle (its metric) from before
//     the snapshot until the first cycle completed after it, and reports the
//     longest gap between two completions, expire-gap-s, against the
//     interval (60 s: the job keeps its interval when the gap stays near it).
//
// Run it with -benchtime 1x; it takes about two minutes at the defaults.
func BenchmarkSnapshotUnderLoad(b *testing.B) {
	for range b.N {
		benchSnapshotUnderLoad(b)
	}
}

func benchSnapshotUnderLoad(b *testing.B) {
	ctx := context.Background()
	purchases := envInt(b, snapshotPurchasesEnv, 10000)
	rate := envInt(b, snapshotRateEnv, 500)
	db := testbed.NewDatabase(b)
	brokers := testbed.NewKafka(b, contract.Topic)
	srv := startServer(b, db.URL, brokers, "PIN_EXPIRE_INTERVAL=1m")
	pkg, err := createPackage(ctx, srv.baseURL, srv.issue(b, auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}))
	require.NoError(b, err)
	seedActivePurchases(b, db, pkg, purchases, 7*24*time.Hour)
	seedActivePurchases(b, db, pkg, 400, -time.Hour) // due: the expiry has work
	active := func() int {
		var n int
		require.NoError(b, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Active'`).Scan(&n))
		return n
	}

	// Each load lasts as long as the snapshot of what is Active will.
	window := time.Duration(float64(active()) / float64(rate) * float64(time.Second))
	load := loadConfig{
		BaseURL:     srv.baseURL,
		TenantToken: srv.issue(b, auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}),
		PackageID:   pkg,
		Clients:     4,
		Rate:        snapshotAPIRate,
		Duration:    window,
		Warmup:      time.Second,
	}
	completions := &expiryWatch{}
	stopWatch := completions.start(b, srv.baseURL)
	defer stopWatch()

	without, err := runLoad(ctx, load)
	require.NoError(b, err)
	b.Logf("API without a snapshot: %s (load %s)", without.summary(), loadAverage())

	before := active()
	snapshotStart := time.Now()
	type outcome struct {
		stdout, stderr string
		err            error
		took           time.Duration
	}
	done := make(chan outcome, 1)
	args := []string{"promotion", "snapshot", "--rate", strconv.Itoa(rate)}
	if os.Getenv(snapshotBatchEnv) != "" {
		args = append(args, "--batch-size", strconv.Itoa(envInt(b, snapshotBatchEnv, 0)))
	}
	go func() {
		cmd := exec.Command(srv.bin, args...)
		cmd.Env = append(os.Environ(), "PIN_DATABASE_URL="+db.URL)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		done <- outcome{out.String(), errOut.String(), err, time.Since(snapshotStart)}
	}()
	with, err := runLoad(ctx, load)
	require.NoError(b, err)
	snap := <-done
	require.NoError(b, snap.err, "pin promotion snapshot: %s", snap.stderr)
	snapshotEnd := time.Now()
	b.Logf("API with a snapshot: %s (load %s)", with.summary(), loadAverage())
	var res struct {
		Events int `json:"events"`
	}
	require.NoError(b, json.Unmarshal([]byte(strings.TrimSpace(snap.stdout)), &res), snap.stdout)
	b.Logf("snapshot: %d events in %s at --rate %d (Active before %d, after %d)", res.Events, snap.took.Round(time.Millisecond), rate, before, active())

	gap := completions.gapAround(b, snapshotStart, snapshotEnd, 90*time.Second)
	b.Logf("expiry: longest gap between completed cycles around the snapshot %s (interval 1m; completions %v)",
		gap.Round(time.Millisecond), completions.seen)

	p99 := func(r loadResult) float64 { return ms(r.Percentile(99)) }
	b.ReportMetric(p99(without), "api-p99-ms")
	b.ReportMetric(p99(with), "snapshot-api-p99-ms")
	b.ReportMetric(p99(with)/p99(without), "api-p99-ratio")
	b.ReportMetric(float64(without.Errors+with.Errors), "api-errors")
	b.ReportMetric(snap.took.Seconds(), "snapshot-s")
	b.ReportMetric(float64(res.Events), "snapshot-events")
	b.ReportMetric(gap.Seconds(), "expire-gap-s")
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
// would take longer than the benchmark.
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
				payment_status, starts_at, ends_at, created_by_user_id, created_at, updated_at, version)
			SELECT gen_random_uuid(), gen_random_uuid(), pkg.id, pkg.code, pkg.kind, pkg.boost_weight,
				pkg.price_amount, pkg.currency_id, pkg.iso_code, pkg.currency_name, pkg.sign, 'Active', 'NotRequired',
				$3::timestamptz - make_interval(days => pkg.duration_days), $3::timestamptz, gen_random_uuid(), now(), now(), 1
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

// start scrapes baseURL every 250 ms until the returned func is called.
func (w *expiryWatch) start(tb testing.TB, baseURL string) func() {
	tb.Helper()
	w.completed = make(chan time.Time, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var last float64
		tick := time.NewTicker(250 * time.Millisecond)
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
