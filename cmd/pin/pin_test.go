package main_test

// Black-box tests of the pin binary: they build ./cmd/pin, start it as a
// process and talk to it only through the outward interface — command line,
// environment, HTTP, the database tables and the Kafka topic.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

const (
	topic     = "pin.promotion.purchase-changed.v1"
	jwtSecret = "black-box-test-secret-0123456789abcdef"
)

var pinBin string

// testOnlyTopics are the topics of the test-only modules a build with -tags
// pintestmodules registers (reviews_test.go adds them): the binary under
// test declares topic and these.
var testOnlyTopics []string

var update = flag.Bool("update", false, "rewrite docs/ops/exported-metrics.txt from the running binary")

// exportedMetricsFile lists the metric families pin exports; the ops tests
// check every metric of the dashboard and the alert rules against it.
const exportedMetricsFile = "../../docs/ops/exported-metrics.txt"

func TestMain(m *testing.M) {
	bin, remove, err := testbed.BuildBinary(".", ".", "pin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pinBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// pinCmd prepares the binary with only the given environment (plus PATH and
// HOME), so the developer's own PIN_* variables never leak into a test.
func pinCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, pinBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	return cmd
}

func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pinCmd(ctx, env, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("pin %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func TestBadConfigurationExitsTwoNamingTheVariable(t *testing.T) {
	t.Parallel()
	serveEnv := []string{"PIN_KAFKA_BROKERS=127.0.0.1:1", "PIN_AUTH_JWT_SECRET=" + jwtSecret}
	tests := []struct {
		name    string
		env     []string
		args    []string
		wantVar string
	}{
		{"interval too short", append([]string{"PIN_EXPIRE_INTERVAL=10s"}, serveEnv...), []string{"serve"}, "PIN_EXPIRE_INTERVAL"},
		{"no brokers", []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret}, []string{"serve"}, "PIN_KAFKA_BROKERS"},
		{"boost projection neither on nor off", append([]string{"PIN_BOOST_PROJECTION=true"}, serveEnv...), []string{"serve"}, "PIN_BOOST_PROJECTION"},
		{"no secret", []string{"PIN_KAFKA_BROKERS=127.0.0.1:1"}, []string{"serve"}, "PIN_AUTH_JWT_SECRET"},
		{"malformed database url", append([]string{"PIN_DATABASE_URL=postgres://%zz"}, serveEnv...), []string{"serve"}, "PIN_DATABASE_URL"},
		{"batch size out of range", []string{"PIN_EXPIRE_BATCH_SIZE=0"}, []string{"expire-promotions", "--once"}, "PIN_EXPIRE_BATCH_SIZE"},
		{"short secret for token", []string{"PIN_AUTH_JWT_SECRET=short"}, []string{"token", "--tenant", uuid.NewString()}, "PIN_AUTH_JWT_SECRET"},
		{"max token lifetime out of range", []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret, "PIN_AUTH_JWT_MAX_TTL=10000h"},
			[]string{"token", "--tenant", uuid.NewString()}, "PIN_AUTH_JWT_MAX_TTL"},
		{"issuer with a space", append([]string{"PIN_AUTH_JWT_ISSUER=a b"}, serveEnv...), []string{"serve"}, "PIN_AUTH_JWT_ISSUER"},
		{"audience with a control character", append([]string{"PIN_AUTH_JWT_AUDIENCE=a\x01"}, serveEnv...), []string{"serve"}, "PIN_AUTH_JWT_AUDIENCE"},
		{"sasl mechanism without user", append([]string{"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-512", "PIN_KAFKA_SASL_PASSWORD=kafka-secret-4c1d"}, serveEnv...), []string{"serve"}, "PIN_KAFKA_SASL_USERNAME"},
		{"tls key without certificate", append([]string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_KEY_FILE=/nonexistent/key.pem"}, serveEnv...), []string{"serve"}, "PIN_KAFKA_TLS_CERT_FILE"},
		{"unreadable password file", append([]string{"PIN_KAFKA_SASL_MECHANISM=PLAIN", "PIN_KAFKA_SASL_USERNAME=pin", "PIN_KAFKA_SASL_PASSWORD_FILE=/nonexistent/password"}, serveEnv...), []string{"kafka", "create-topics"}, "PIN_KAFKA_SASL_PASSWORD_FILE"},
		{"create-topics without brokers", nil, []string{"kafka", "create-topics"}, "PIN_KAFKA_BROKERS"},
		{"admin listener on the public port", append([]string{"PIN_HTTP_ADDR=127.0.0.1:8080", "PIN_ADMIN_ADDR=0.0.0.0:8080"}, serveEnv...), []string{"serve"}, "PIN_ADMIN_ADDR"},
		{"admin listener on every interface without the opt-in", append([]string{"PIN_ADMIN_ADDR=0.0.0.0:6060"}, serveEnv...), []string{"serve"}, "PIN_ADMIN_ALLOW_REMOTE"},
		{"metrics served nowhere", append([]string{"PIN_METRICS_PUBLIC=false"}, serveEnv...), []string{"serve"}, "PIN_METRICS_PUBLIC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := run(t, tt.env, tt.args...)
			require.Equal(t, 2, code, "stderr: %s", stderr)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			require.Len(t, lines, 1, "one line, got: %s", stderr)
			require.Contains(t, lines[0], tt.wantVar)
			require.NotContains(t, stderr, "kafka-secret-4c1d", "a secret is never echoed")
		})
	}
}

func TestBadCommandLineExitsTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"nonsense"}, {"migrate"}, {"migrate", "sideways"}, {"kafka"}, {"kafka", "delete-topics"}, {"kafka", "create-topics", "--replication-factor", "0"}, {"kafka", "create-topics", "--retention", "1m"}, {"expire-promotions"}, {"expire-promotions", "--once", "--batch-size", "0"}, {"expire-promotions", "--once", "--batch-size", "10001"}, {"token"}, {"token", "--tenant", uuid.NewString(), "extra"}, {"serve", "extra"}, {"dev", "--port", "1"}} {
		_, stderr, code := run(t, nil, args...)
		require.Equal(t, 2, code, "pin %v: %s", args, stderr)
	}
}

func TestTokenAndVersion(t *testing.T) {
	t.Parallel()
	tenant := uuid.NewString()
	out, stderr, code := run(t, []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret}, "token", "--tenant", tenant, "--role", "admin")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(out), "."), 3, "a JWT")
	_, stderr, code = run(t, []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret, "PIN_AUTH_JWT_MAX_TTL=24h"},
		"token", "--tenant", tenant, "--ttl", "25h")
	require.Equal(t, 2, code, "a token the server would refuse is not minted: %s", stderr)
	require.Contains(t, stderr, "PIN_AUTH_JWT_MAX_TTL")
	out, _, code = run(t, nil, "version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "pin "), out)
}

// TestHelpListsFlagsAndExitsZero asks every command for its help: it lists
// the command's flags on stdout, exits 0 and never runs the command (serve
// and dev get an environment they would start with, and a busy check would
// hang on a server that started).
func TestHelpListsFlagsAndExitsZero(t *testing.T) {
	t.Parallel()
	env := []string{"PIN_KAFKA_BROKERS=127.0.0.1:1", "PIN_AUTH_JWT_SECRET=" + jwtSecret, "PIN_HTTP_ADDR=" + testbed.FreeAddr(t)}
	for _, tt := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"serve", "--help"}, nil},
		{[]string{"dev", "-h"}, nil},
		{[]string{"token", "--help"}, []string{"-tenant", "-user", "-role", "-ttl"}},
		{[]string{"expire-promotions", "--help"}, []string{"-once", "-batch-size"}},
		{[]string{"kafka", "create-topics", "--help"}, []string{"-replication-factor", "-retention"}},
		{[]string{"migrate", "--help"}, nil},
		{[]string{"healthcheck", "--help"}, nil},
	} {
		out, stderr, code := run(t, env, tt.args...)
		require.Equal(t, 0, code, "pin %v: %s", tt.args, stderr)
		require.Empty(t, stderr, "pin %v starts nothing and logs nothing", tt.args)
		require.True(t, strings.HasPrefix(out, "Usage: pin "+tt.args[0]), "pin %v: %s", tt.args, out)
		for _, f := range tt.flags {
			require.Contains(t, out, f, "pin %v", tt.args)
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}} {
		out, _, code := run(t, nil, args...)
		require.Equal(t, 0, code)
		for _, cmd := range []string{"serve", "dev", "migrate", "expire-promotions", "kafka create-topics", "token", "healthcheck", "version"} {
			require.Contains(t, out, "pin "+cmd, "pin %v lists the commands", args)
		}
	}
	out, _, code := run(t, nil, "--version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "pin "), out)
}

// TestDevOnABusyPortFailsBeforeItsBanner holds the HTTP port: pin dev
// announces nothing, exits non-zero with a last line naming PIN_HTTP_ADDR,
// and its stop logs no ERROR (a context canceled is no failure).
func TestDevOnABusyPortFailsBeforeItsBanner(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	out, stderr, code := run(t, []string{
		"PIN_DATABASE_URL=" + db.URL,
		"PIN_HTTP_ADDR=" + busy.Addr().String(),
		"PIN_DEV_KAFKA_ADDR=" + testbed.FreeAddr(t),
	}, "dev")
	require.NotEqual(t, 0, code, "stderr: %s", stderr)
	require.NotContains(t, out, "pin dev is running", "no banner before the listener is bound")
	require.NotContains(t, out, "TOKEN=")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Contains(t, lines[len(lines)-1], "PIN_HTTP_ADDR")
	require.NotContains(t, stderr, `"level":"ERROR"`)
}

func TestMigrateStatusUpDown(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	out, stderr, code := run(t, env, "migrate", "status")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "pending", "the test database starts migrated")
	out, stderr, code = run(t, env, "migrate", "up")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "up to date", "up is idempotent")
	require.Contains(t, out, "outbox tables ready for pin.promotion.purchase-changed.v1", "up makes the declared topics' tables")
	_, stderr, code = run(t, env, "migrate", "down")
	require.Equal(t, 0, code, stderr)
	out, _, _ = run(t, env, "migrate", "status")
	require.Contains(t, out, "pending")
	_, stderr, code = run(t, env, "migrate", "up")
	require.Equal(t, 0, code, stderr)
}

// server is a running `pin dev` or `pin serve` process.
type server struct {
	cmd    *exec.Cmd
	base   string
	out    *testbed.LogBuffer
	waited chan error
}

func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	var httpAddr string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PIN_HTTP_ADDR="); ok {
			httpAddr = v
		}
	}
	require.NotEmpty(t, httpAddr)
	s := &server{base: "http://" + httpAddr, out: &testbed.LogBuffer{}, waited: make(chan error, 1)}
	s.cmd = pinCmd(context.Background(), env, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	require.NoError(t, s.cmd.Start())
	go func() { s.waited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.waited
		if t.Failed() {
			t.Logf("pin output:\n%s", s.out.String())
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "pin never became ready")
	return s
}

// stop sends SIGTERM and returns the exit code and how long the stop took.
func (s *server) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.waited:
		s.waited <- nil // for the cleanup
		return s.cmd.ProcessState.ExitCode(), time.Since(start)
	case <-time.After(30 * time.Second):
		t.Fatalf("pin did not stop within 30s of SIGTERM")
		return -1, 0
	}
}

func (s *server) do(t *testing.T, method, path, token string, body any, headers ...string) (int, map[string]any) {
	t.Helper()
	code, out, err := s.send(method, path, token, body, headers...)
	require.NoError(t, err)
	return code, out
}

// send is do for a goroutine, which must not stop the test: it returns
// what went wrong instead.
func (s *server) send(method, path, token string, body any, headers ...string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return 0, nil, fmt.Errorf("body %s: %w", raw, err)
		}
	}
	return resp.StatusCode, out, nil
}

func token(t *testing.T, tenant uuid.UUID, roles ...string) string {
	t.Helper()
	args := []string{"token", "--tenant", tenant.String()}
	for _, r := range roles {
		args = append(args, "--role", r)
	}
	out, stderr, code := run(t, []string{"PIN_AUTH_JWT_SECRET=" + jwtSecret}, args...)
	require.Equal(t, 0, code, stderr)
	return strings.TrimSpace(out)
}

// TestDevFromPurchaseToKafkaAndBack runs `pin dev` as a new user would: it
// serves the probes, sells a demo package, the Active and Cancelled events
// arrive on the embedded broker with the documented key and headers, and
// SIGTERM stops it cleanly within 10 s.
func TestDevFromPurchaseToKafkaAndBack(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	s, kafkaAddr := startDevWithBroker(t, db)

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(s.base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		if path == "/metrics" {
			for _, name := range []string{"promotion_expire_run_total", "promotion_expire_backlog", "pin_outbox_backlog_messages", "go_goroutines", "process_resident_memory_bytes"} {
				require.Contains(t, string(body), name)
			}
		}
	}

	tenant := uuid.New()
	tok := token(t, tenant)
	code, pkgs := s.do(t, http.MethodGet, "/api/developers/v1/promotion-packages", tok, nil)
	require.Equal(t, http.StatusOK, code)
	var packageID string
	for _, item := range pkgs["items"].([]any) {
		p := item.(map[string]any)
		if p["code"] == "project-boost-week" {
			packageID = p["id"].(string)
		}
	}
	require.NotEmpty(t, packageID, "pin dev seeds project-boost-week")

	code, purchase := s.do(t, http.MethodPost, "/api/developers/v1/promotions", tok, map[string]any{
		"packageId": packageID,
		"targets":   []map[string]any{{"targetKind": "Project", "targetId": uuid.NewString()}},
	}, "Idempotency-Key", uuid.NewString())
	require.Equal(t, http.StatusCreated, code, "%v", purchase)
	purchaseID := purchase["id"].(string)
	code, cancelled := s.do(t, http.MethodPost, "/api/developers/v1/promotions/"+purchaseID+"/cancel", tok, map[string]any{"reason": "changed my mind"})
	require.Equal(t, http.StatusOK, code, "%v", cancelled)
	require.Equal(t, "Cancelled", cancelled["status"])

	var statuses []string
	for _, r := range purchaseRecords(t, []string{kafkaAddr}, nil, purchaseID, 2) {
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		require.Equal(t, "pin.promotion.purchase-changed", headers["event_type"])
		require.Equal(t, "1", headers["contract_version"])
		require.NotEmpty(t, headers["message_id"])
		require.NotEmpty(t, headers["correlation_id"])
		var env struct {
			MessageID string `json:"messageId"`
			Payload   struct {
				Status  string `json:"status"`
				Version int    `json:"version"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(r.Value, &env))
		require.Equal(t, headers["message_id"], env.MessageID)
		statuses = append(statuses, env.Payload.Status)
	}
	require.Equal(t, []string{"Active", "Cancelled"}, statuses, "both events, in order, on one partition")

	requireExportedMetricsListed(t, s)
	requireTracedPurchase(t, s)

	// The banner's exports follow the addresses given, for a second shell.
	for _, line := range []string{
		"export PIN_DATABASE_URL='" + db.URL + "'",
		"export PIN_KAFKA_BROKERS=" + kafkaAddr + "\n",
		"export PIN_AUTH_JWT_SECRET=" + jwtSecret,
		"export BASE=" + s.base + " BROKER=" + kafkaAddr + " PATH='",
		"export TOKEN=ey",
		"export ADMIN_TOKEN=ey",
	} {
		require.Contains(t, s.out.String(), line)
	}

	code, took := s.stop(t)
	require.Equal(t, 0, code, "exit code after SIGTERM")
	require.Less(t, took, 10*time.Second)
}

// TestServeRefusesTrafficUntilMigrated shows /readyz answering 503 with a
// reason code (no detail) on an empty database, and `pin serve` staying up
// while the relay's broker is unreachable.
func TestServeRefusesTrafficUntilMigrated(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	for {
		_, stderr, code := run(t, env, "migrate", "down")
		if code != 0 {
			require.Contains(t, stderr, "migrate down")
			break
		}
	}
	httpAddr := testbed.FreeAddr(t)
	cmd := pinCmd(context.Background(), append(env,
		"PIN_HTTP_ADDR="+httpAddr,
		"PIN_KAFKA_BROKERS="+testbed.FreeAddr(t),
		"PIN_AUTH_JWT_SECRET="+jwtSecret,
	), "serve")
	out := &testbed.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 30*time.Second, 50*time.Millisecond, "readyz must answer 503 on an unmigrated database; output:\n%s", out)
	require.JSONEq(t, `{"status":"not ready","reason":"migrations_pending"}`, string(body), "a reason code, no detail")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "migrations_pending") }, 10*time.Second, 50*time.Millisecond, "the detail is logged")
	_, stderr, code := run(t, env, "migrate", "up")
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
}

// TestExpireOnceByThreeProcessesAtOnce fills a backlog the black-box way
// (purchases through the API, then starts_at/ends_at moved into the past)
// and runs `pin expire-promotions --once` three processes at a time: each
// purchase is expired exactly once and has exactly one Expired event.
func TestExpireOnceByThreeProcessesAtOnce(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	env := []string{"PIN_DATABASE_URL=" + db.URL}
	const purchases = 150
	purchasesThroughAPI(t, db, purchases)

	_, err := db.SQL.Exec(`UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '30 days', ends_at = ends_at - interval '30 days'`)
	require.NoError(t, err)

	type result struct {
		RunID         string    `json:"runId"`
		AsOf          time.Time `json:"asOf"`
		Expired       int       `json:"expired"`
		SkippedLocked int       `json:"skippedLocked"`
		Failed        int       `json:"failed"`
		DurationMs    *int64    `json:"durationMs"`
	}
	total := 0
	runIDs := map[string]bool{}
	for round := 0; round < 20 && total < purchases; round++ {
		type outcome struct {
			out, stderr string
			code        int
		}
		var wg sync.WaitGroup
		outcomes := make([]outcome, 3)
		for i := range outcomes {
			wg.Go(func() {
				// require must not run off the test goroutine: collect, then check.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := pinCmd(ctx, env, "expire-promotions", "--once", "--batch-size", "20")
				var out, errOut bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errOut
				_ = cmd.Run()
				outcomes[i] = outcome{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
			})
		}
		wg.Wait()
		results := make([]result, len(outcomes))
		for i, o := range outcomes {
			require.Equal(t, 0, o.code, o.stderr)
			lines := strings.Split(strings.TrimSpace(o.out), "\n")
			require.Len(t, lines, 1, "one JSON line on stdout: %s", o.out)
			dec := json.NewDecoder(strings.NewReader(lines[0]))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&results[i]), lines[0])
		}
		for _, r := range results {
			require.NotEmpty(t, r.RunID)
			require.False(t, runIDs[r.RunID], "run ids are unique")
			runIDs[r.RunID] = true
			require.False(t, r.AsOf.IsZero())
			require.NotNil(t, r.DurationMs)
			require.Zero(t, r.Failed)
			total += r.Expired
		}
	}
	require.Equal(t, purchases, total, "each purchase expired exactly once across all processes")

	var active, expired int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FILTER (WHERE status = 'Active'), count(*) FILTER (WHERE status = 'Expired')
		FROM promotion.promotion_purchases`).Scan(&active, &expired))
	require.Equal(t, 0, active)
	require.Equal(t, purchases, expired)
	requireOneEventPerPurchase(t, db, "Expired", purchases)
}

// requireOneEventPerPurchase reads the outbox table (one event per row, as
// it goes on the wire) and checks that every purchase has exactly one event of
// the given status.
func requireOneEventPerPurchase(t *testing.T, db *testbed.Database, status string, purchases int) {
	t.Helper()
	rows, err := db.SQL.Query(`SELECT payload::text FROM outbox.pin_promotion_purchase_changed_v1`)
	require.NoError(t, err)
	defer rows.Close()
	perPurchase := map[string]int{}
	for rows.Next() {
		var raw string
		require.NoError(t, rows.Scan(&raw))
		var env struct {
			Payload struct {
				PurchaseID string `json:"purchaseId"`
				Status     string `json:"status"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &env), raw)
		if env.Payload.Status == status {
			perPurchase[env.Payload.PurchaseID]++
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, perPurchase, purchases)
	for id, n := range perPurchase {
		require.Equal(t, 1, n, "purchase %s has %d %s events", id, n, status)
	}
}

// requireExportedMetricsListed scrapes the running binary and checks that
// docs/ops/exported-metrics.txt lists exactly the metric families it
// exports (refresh with go test ./cmd/pin -run TestDev -update).
func requireExportedMetricsListed(t *testing.T, s *server) {
	t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	var families []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 3 && fields[0] == "#" && fields[1] == "TYPE" {
			families = append(families, fields[2])
		}
	}
	require.NoError(t, sc.Err())
	slices.Sort(families)
	want := "# Metric families exported by pin (dev and serve), scraped from a running binary by\n" +
		"# cmd/pin's TestDevFromPurchaseToKafkaAndBack; refresh with: go test ./cmd/pin -run TestDev -update\n" +
		strings.Join(families, "\n") + "\n"
	if *update {
		require.NoError(t, os.WriteFile(exportedMetricsFile, []byte(want), 0o644))
	}
	got, err := os.ReadFile(exportedMetricsFile)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "docs/ops/exported-metrics.txt is stale: rerun with -update")
}
