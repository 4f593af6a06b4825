package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// Environment of BenchmarkAPI.
const (
	// binaryEnv names a pin binary to run (scripts/bench.sh builds one
	// into .bench/); without it the benchmark builds ./cmd/pin itself.
	binaryEnv = "PIN_BENCH_PIN_BINARY"
	// durationEnv overrides the measured time of each load (default 10s).
	durationEnv = "PIN_BENCH_API_DURATION"
	// roundsEnv overrides the number of interleaved rounds (default 4).
	roundsEnv = "PIN_BENCH_API_ROUNDS"
)

// apiClients is the number of concurrent clients, for the API and pgbench.
const apiClients = 32

// BenchmarkAPI measures the purchase API end to end and compares it with
// what PostgreSQL itself allows for the same transaction, in one run on one
// fresh database:
//
//  1. it starts `pin serve` (the real binary, as a subprocess) on a fresh
//     database with a kfake broker, waits for /readyz, lets it idle for 3 s
//     and reads its peak RSS (VmHWM, /proc/<pid>/status): idle-MB;
//  2. rounds of the API and of pgbench alternate, in the order API, pgbench,
//     pgbench, API, API, … so that neither always runs on the warmer or the
//     fuller table. An API round is 32 clients POSTing purchases for 10 s
//     after a 2 s warm-up; a pgbench round runs the same transaction — the
//     purchase row, its 1 to 3 target rows and one outbox row of the size
//     the API writes, in one transaction — with 32 clients for 10 s; each
//     round also runs the same writes as one statement (pgbenchOneStatement),
//     the form the API now uses, reported for information;
//  3. each round pair gives the API's share of pgbench's rate and its p99
//     against pgbench's p99. Reported: the medians over the rounds of
//     api-purchases/s, api-p50-ms, api-p99-ms, pgbench-tps, pgbench-p99-ms,
//     pgbench-one-statement-tps, api/pgbench-one-statement,
//     api/pgbench and api-p99/pgbench-p99, the worst pair of each ratio
//     (…-worst), api-errors over all rounds, and the server's VmHWM after
//     the last round: load-MB.
//
// The server's stderr (its logs) is kept in memory and shown only if the
// benchmark fails. pgbench must be on PATH (scripts/bench.sh checks).
func BenchmarkAPI(b *testing.B) {
	for range b.N {
		benchAPI(b)
	}
}

// apiRound is one pair of an API round and a pgbench round.
type apiRound struct {
	api   loadResult
	pg    pgbenchResult // pgbenchScript, the target's reference
	pgOne pgbenchResult // pgbenchOneStatement, informative
}

func (r apiRound) throughput() float64 { return r.api.PerSecond() / r.pg.tps }
func (r apiRound) p99() float64        { return ms(r.api.Percentile(99)) / r.pg.p99 }

func benchAPI(b *testing.B) {
	ctx := context.Background()
	duration := 10 * time.Second
	if s := os.Getenv(durationEnv); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(b, err, durationEnv)
		duration = d
	}
	rounds := 4
	if s := os.Getenv(roundsEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err, roundsEnv)
		require.Positive(b, n, roundsEnv)
		rounds = n
	}
	pgbench, err := exec.LookPath("pgbench")
	require.NoError(b, err, "pgbench is needed (Debian: apt-get install postgresql-client)")

	db := testbed.NewDatabase(b)
	brokers := testbed.NewKafka(b, contract.Topic)
	srv := startServer(b, db.URL, brokers)

	// 1. idle
	time.Sleep(3 * time.Second)
	idle, err := readMemory(srv.pid)
	require.NoError(b, err)

	// 2. API and pgbench rounds, interleaved
	pkg, err := createPackage(ctx, srv.baseURL, srv.issue(b, auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}))
	require.NoError(b, err)
	load := loadConfig{
		BaseURL:     srv.baseURL,
		TenantToken: srv.issue(b, auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}),
		PackageID:   pkg,
		Clients:     apiClients,
		Duration:    duration,
		Warmup:      2 * time.Second,
	}
	runAPI := func() loadResult {
		res, err := runLoad(ctx, load)
		require.NoError(b, err)
		b.Logf("API: %s (load %s)", res.summary(), loadAverage())
		return res
	}
	var event, metadata string
	runPG := func(name, script string) pgbenchResult {
		if event == "" {
			// The outbox row pgbench writes is a real one, from the API's
			// first round.
			require.NoError(b, db.SQL.QueryRowContext(ctx,
				`SELECT payload::text, metadata::text FROM outbox.messages WHERE topic = $1 ORDER BY "offset" DESC LIMIT 1`, contract.Topic).Scan(&event, &metadata))
		}
		pg := runPgbench(b, pgbench, script, db.URL, pkg, event, metadata, duration)
		b.Logf("pgbench (%s): %.0f tps, p50 %.1f ms, p99 %.1f ms, %d transactions (load %s)", name, pg.tps, pg.p50, pg.p99, pg.count, loadAverage())
		return pg
	}
	all := make([]apiRound, rounds)
	failed := 0
	for i := range all {
		r := &all[i]
		if i%2 == 0 {
			r.api = runAPI()
			r.pg = runPG("transaction", pgbenchScript)
			r.pgOne = runPG("one statement", pgbenchOneStatement)
		} else {
			r.pgOne = runPG("one statement", pgbenchOneStatement)
			r.pg = runPG("transaction", pgbenchScript)
			r.api = runAPI()
		}
		failed += r.api.Errors
		b.Logf("round %d: API/pgbench %.2f, API p99 / pgbench p99 %.2f, API / one-statement pgbench %.2f",
			i+1, r.throughput(), r.p99(), r.api.PerSecond()/r.pgOne.tps)
	}
	// pgbench's rounds write outbox rows too, which the server's relay
	// forwards: what it has not yet is what its stop leaves to the next one.
	backlog, oldest, _, err := relay.Stats(ctx, db.SQL, contract.Topic)
	require.NoError(b, err)
	b.Logf("outbox after the rounds: %d rows not yet relayed, the oldest %s old", backlog, oldest.Round(time.Second))
	loaded, err := readMemory(srv.pid)
	require.NoError(b, err)
	b.Logf("pin serve: VmHWM idle %.1f MB, after load %.1f MB (VmRSS now %.1f MB)", idle.HWM, loaded.HWM, loaded.RSS)

	median := func(f func(apiRound) float64) float64 {
		v := make([]float64, len(all))
		for i, r := range all {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	worst := func(f func(apiRound) float64, higherIsWorse bool) float64 {
		w := f(all[0])
		for _, r := range all[1:] {
			if v := f(r); (v > w) == higherIsWorse {
				w = v
			}
		}
		return w
	}
	b.ReportMetric(median(func(r apiRound) float64 { return r.api.PerSecond() }), "api-purchases/s")
	b.ReportMetric(median(func(r apiRound) float64 { return ms(r.api.Percentile(50)) }), "api-p50-ms")
	b.ReportMetric(median(func(r apiRound) float64 { return ms(r.api.Percentile(99)) }), "api-p99-ms")
	b.ReportMetric(float64(failed), "api-errors")
	b.ReportMetric(median(func(r apiRound) float64 { return r.pg.tps }), "pgbench-tps")
	b.ReportMetric(median(func(r apiRound) float64 { return r.pg.p50 }), "pgbench-p50-ms")
	b.ReportMetric(median(func(r apiRound) float64 { return r.pg.p99 }), "pgbench-p99-ms")
	b.ReportMetric(median(func(r apiRound) float64 { return r.pgOne.tps }), "pgbench-one-statement-tps")
	b.ReportMetric(median(func(r apiRound) float64 { return r.api.PerSecond() / r.pgOne.tps }), "api/pgbench-one-statement")
	b.ReportMetric(median(apiRound.throughput), "api/pgbench")
	b.ReportMetric(worst(apiRound.throughput, false), "api/pgbench-worst")
	b.ReportMetric(median(apiRound.p99), "api-p99/pgbench-p99")
	b.ReportMetric(worst(apiRound.p99, true), "api-p99/pgbench-p99-worst")
	b.ReportMetric(idle.HWM, "idle-MB")
	b.ReportMetric(loaded.HWM, "load-MB")
	if failed > 0 {
		b.Errorf("%d requests failed", failed)
	}
}

// loadAverage is the 1-minute load average, for the log of each round.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(data))[0]
}

// server is a running `pin serve`.
type server struct {
	pid     int
	baseURL string
	authn   *auth.Authenticator
	// bin is the pin binary it runs, for the commands a benchmark runs
	// beside it.
	bin string
}

func (s *server) issue(tb testing.TB, p auth.Principal) string {
	tb.Helper()
	t, err := s.authn.Issue(p, time.Hour)
	require.NoError(tb, err)
	return t
}

// startServer runs `pin serve` on databaseURL until tb ends (SIGTERM, then
// a wait for a clean exit).
func startServer(tb testing.TB, databaseURL string, brokers []string, env ...string) *server {
	tb.Helper()
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		bin = filepath.Join(tb.TempDir(), "pin")
		build := exec.Command("go", "build", "-o", bin, "github.com/pinmarket/pin/cmd/pin")
		out, err := build.CombinedOutput()
		require.NoError(tb, err, "go build ./cmd/pin: %s", out)
	}
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(tb, err)
	secretHex := hex.EncodeToString(secret)
	authn, err := auth.NewAuthenticator([]byte(secretHex))
	require.NoError(tb, err)
	addr := testbed.FreeAddr(tb)

	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"PIN_DATABASE_URL="+databaseURL,
		"PIN_HTTP_ADDR="+addr,
		"PIN_KAFKA_BROKERS="+strings.Join(brokers, ","),
		"PIN_AUTH_JWT_SECRET="+secretHex,
		"PIN_LOG_LEVEL=info",
	)
	cmd.Env = append(cmd.Env, env...)
	logs := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(tb, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("pin serve exited: %v\n%s", err, logs.String())
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			tb.Errorf("pin serve did not stop on SIGTERM\n%s", logs.String())
		}
		if tb.Failed() {
			tb.Logf("pin serve output (tail):\n%s", logs.String())
		}
	})
	baseURL := "http://" + addr
	if err := waitReady(context.Background(), baseURL, 30*time.Second); err != nil {
		tb.Fatalf("%v\n%s", err, logs.String())
	}
	return &server{pid: cmd.Process.Pid, baseURL: baseURL, authn: authn, bin: bin}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = slices.Clone(t.buf[over:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// pgbenchScript is the API's transaction as plain SQL: the purchase (the
// row as the API writes it, id generated by PostgreSQL and handed on with
// \gset), its 1 to 3 targets, and one outbox row as the API writes it
// (:event and :metadata are real ones, copied from the API's outbox). With -M prepared the variables are statement parameters, and
// the statements are prepared once per connection, as pgx caches them.
const pgbenchScript = `\set ntargets random(1, 3)
BEGIN;
` + pgbenchPurchaseInsert + ` AS purchase \gset
INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
SELECT :purchase, 'Project', gen_random_uuid(), p FROM generate_series(0, :ntargets::int - 1) AS p;
INSERT INTO outbox."pin_promotion_purchase_changed_v1" (uuid, payload, metadata)
VALUES (gen_random_uuid(), :event, :metadata);
COMMIT;
`

// pgbenchPurchaseInsert is the purchase row as the API writes it, its id
// generated by PostgreSQL and returned.
const pgbenchPurchaseInsert = `INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind, boost_weight,
	price_amount, currency_id, currency_iso_code, currency_name, currency_sign, status, payment_status,
	starts_at, ends_at, cancel_reason, created_by_user_id, updated_by_user_id, created_at, updated_at, version)
VALUES (gen_random_uuid(), gen_random_uuid(), :package, 'pinload', 'ProjectBoost', 10,
	1500.00, 643, 'RUB', 'Российский рубль', '₽', 'Active', 'NotRequired',
	now(), now() + interval '7 days', NULL, gen_random_uuid(), gen_random_uuid(), now(), now(), 1)
RETURNING id`

// pgbenchOneStatement is pgbenchScript's writes as one statement, run as a
// transaction of its own: the form the API uses for a purchase without an
// Idempotency-Key (ADR-0004), so PostgreSQL's limit for it. Informative:
// the issue's target is set against pgbenchScript.
const pgbenchOneStatement = `\set ntargets random(1, 3)
WITH purchase AS (
` + pgbenchPurchaseInsert + `
), targets AS (
	INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
	SELECT purchase.id, 'Project', gen_random_uuid(), p FROM purchase, generate_series(0, :ntargets::int - 1) AS p
)
INSERT INTO outbox."pin_promotion_purchase_changed_v1" (uuid, payload, metadata)
SELECT gen_random_uuid(), :event::json, :metadata::json FROM purchase;
`

// pgbenchResult is what pgbench measured, the latencies read from its
// per-transaction log.
type pgbenchResult struct {
	tps, p50, p99 float64
	count         int
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

func runPgbench(tb testing.TB, pgbench, sql, databaseURL string, pkg uuid.UUID, event, metadata string, d time.Duration) pgbenchResult {
	tb.Helper()
	dir := tb.TempDir()
	script := filepath.Join(dir, "purchase.sql")
	require.NoError(tb, os.WriteFile(script, []byte(sql), 0o600))
	cmd := exec.Command(pgbench, "-n", "-M", "prepared",
		"-c", strconv.Itoa(apiClients), "-j", "2", "-T", strconv.Itoa(int(d.Seconds())),
		"-f", script, "-D", "package="+pkg.String(), "-D", "event="+event, "-D", "metadata="+metadata,
		"-l", "--log-prefix", filepath.Join(dir, "pgbench_log"),
		databaseURL)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(tb, cmd.Run(), "pgbench: %s", out.String())
	m := tpsLine.FindStringSubmatch(out.String())
	require.NotNil(tb, m, "pgbench output: %s", out.String())
	tps, err := strconv.ParseFloat(m[1], 64)
	require.NoError(tb, err)

	logs, err := filepath.Glob(filepath.Join(dir, "pgbench_log*"))
	require.NoError(tb, err)
	require.NotEmpty(tb, logs, "pgbench logs")
	var lat []float64
	for _, name := range logs {
		f, err := os.Open(name)
		require.NoError(tb, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// client_id transaction_no time script_no time_epoch time_us; time in µs
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseFloat(fields[2], 64)
			require.NoError(tb, err, sc.Text())
			lat = append(lat, us/1000)
		}
		require.NoError(tb, sc.Err())
		require.NoError(tb, f.Close())
	}
	require.NotEmpty(tb, lat)
	slices.Sort(lat)
	return pgbenchResult{tps: tps, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], count: len(lat)}
}
