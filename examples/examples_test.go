// Package examples holds consumers of the promotion event written outside Go;
// its test runs each through `pin contract verify`, the conformance kit as a
// black box, as a team outside would.
package examples

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinmarket/pin/platform/testbed"
)

// jsDir is the JavaScript consumers' package.
const jsDir = "consumers-js"

// verifyTimeout bounds one `pin contract verify --crash` run: every scenario,
// with the consumer killed and restarted (each restart waits out the group's
// session timeout for the killed member).
const verifyTimeout = 10 * time.Minute

var (
	pinOnce sync.Once
	pinBin  string
	pinErr  error
)

// pin builds cmd/pin once per test process.
func pin(t *testing.T) string {
	t.Helper()
	pinOnce.Do(func() {
		var remove func()
		pinBin, remove, pinErr = testbed.BuildBinary("..", "./cmd/pin", "pin")
		if pinErr == nil {
			cleanups = append(cleanups, remove)
		}
	})
	if pinErr != nil {
		t.Fatal(pinErr)
	}
	return pinBin
}

var cleanups []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}

// npmCI installs the package's locked dependencies, as a team's CI would.
func npmCI(t *testing.T, dir string) {
	t.Helper()
	testbed.Tool(t, "node", "apt-get install nodejs npm (Node 18 or newer)")
	npm := testbed.Tool(t, "npm", "apt-get install npm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// TestJSConsumersKeepTheContract runs the JavaScript notifier and billing
// consumer through `pin contract verify --crash`: each passes every scenario
// though killed between read and commit and after commit; each deliberately
// broken variant fails, with a line naming the promise it broke.
func TestJSConsumersKeepTheContract(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance kit against Node.js consumers, killed and restarted: minutes")
	}
	dir, err := filepath.Abs(jsDir)
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, dir)
	bin := pin(t)

	// A broken variant runs the scenario that shows its mistake, not all of
	// them: the correct pair runs every scenario.
	cases := []struct {
		consumer string
		broken   string
		scenario string
		// fail is what a FAIL line must contain; empty: every scenario passes.
		fail string
	}{
		{consumer: "notifier"},
		{consumer: "billing"},
		{consumer: "notifier", broken: "no-dedupe", scenario: "duplicates", fail: "times (want once)"},
		{consumer: "notifier", broken: "no-version-guard", scenario: "older-after-newer", fail: "(a stale record; want none)"},
		{consumer: "notifier", broken: "commit-before-write", scenario: "duplicates", fail: "was committed before its effect was visible"},
		{consumer: "notifier", broken: "no-bounds", scenario: "hostile-records", fail: "but no record the consumer had to acknowledge carries that status"},
		{consumer: "billing", broken: "no-dedupe", scenario: "duplicates", fail: "times (want once)"},
		{consumer: "billing", broken: "commit-before-write", scenario: "duplicates", fail: "was committed before its effect was visible"},
		{consumer: "billing", broken: "no-bounds", scenario: "hostile-records", fail: "but no record the consumer had to acknowledge carries that status"},
		{consumer: "billing", broken: "no-version-guard", scenario: "older-after-newer", fail: "(a stale record; want none)"},
		{consumer: "billing", broken: "refund-uncharged", scenario: "cancelled-without-activation", fail: "performed before any effect of the purchase it could undo"},
	}
	for _, c := range cases {
		name := c.consumer
		consumerCmd := "node " + c.consumer + ".js"
		if c.broken != "" {
			name += "/broken-" + c.broken
			consumerCmd += " --broken " + c.broken
		}
		t.Run(name, func(t *testing.T) {
			db := testbed.NewEmptyDatabase(t)
			var only []string
			if c.scenario != "" {
				only = []string{"--scenario", c.scenario}
			}
			args := append([]string{"--dead-letters", "node " + c.consumer + ".js --dead-letters"}, only...)
			out, code := verify(t, bin, dir, db.URL, consumerCmd, "node "+c.consumer+".js --effects", args...)
			if c.fail == "" {
				if code != 0 || strings.Contains(out, "FAIL ") || !strings.Contains(out, "PASS ") {
					t.Fatalf("pin contract verify --consumer %q --crash: exit %d, want 0 and every scenario PASS:\n%s", consumerCmd, code, out)
				}
				return
			}
			if code != 1 {
				t.Fatalf("pin contract verify --consumer %q --crash: exit %d, want 1 (a scenario fails):\n%s", consumerCmd, code, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "FAIL ") && strings.Contains(line, c.fail) {
					return
				}
			}
			t.Fatalf("pin contract verify --consumer %q --crash: no FAIL line says %q:\n%s", consumerCmd, c.fail, out)
		})
	}
}

// verify runs `pin contract verify --crash` (and args) on its own embedded
// broker, the consumer's state in the database at dbURL; it returns stdout
// and the exit code.
func verify(t *testing.T, bin, dir, dbURL, consumerCmd, effectsCmd string, args ...string) (string, int) {
	t.Helper()
	return verifyArgs(t, bin, dir, dbURL, append([]string{"--consumer", consumerCmd, "--effects", effectsCmd, "--crash"}, args...)...)
}

// verifyArgs runs `pin contract verify` with args, as verify does.
func verifyArgs(t *testing.T, bin, dir, dbURL string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"contract", "verify"}, args...)...)
	cmd.Dir = dir
	// Only what the consumer needs: the developer's own PIN_* never leak in.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PIN_EXAMPLE_DATABASE_URL=" + dbURL,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("pin contract verify: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if code != 0 {
		t.Logf("stderr of pin contract verify %q:\n%s", args, tail(stderr.String(), 4000))
	}
	return stdout.String(), code
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// pyDir is the librdkafka consumers' directory; python is the interpreter
// they name in their #! line, Debian's, which has python3-confluent-kafka and
// python3-psycopg2 (a python3 first on PATH, pyenv's say, may have neither).
const (
	pyDir  = "consumers-py"
	python = "/usr/bin/python3"
)

// pythonWithLibrdkafka skips the test when python cannot import
// confluent_kafka and psycopg2, or fails it when PIN_REQUIRE_EXTERNAL_TOOLS=1.
func pythonWithLibrdkafka(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import confluent_kafka, psycopg2").CombinedOutput()
	if err == nil {
		return
	}
	const install = "apt-get install python3-confluent-kafka python3-psycopg2"
	if os.Getenv(testbed.RequireToolsEnv) == "1" {
		t.Fatalf("%s cannot import confluent_kafka and psycopg2 (%s=1): %v\n%s\ninstall: %s", python, testbed.RequireToolsEnv, err, out, install)
	}
	t.Skipf("%s cannot import confluent_kafka and psycopg2 (install: %s); skipping. With %s=1, as in CI, this fails instead.", python, install, testbed.RequireToolsEnv)
}

// TestLibrdkafkaConsumersKeepTheContract runs the Python notifier and billing
// consumer (librdkafka, the client C#'s Confluent.Kafka wraps) through
// `pin contract verify`: each passes every scenario, with and without
// --crash, in the correct recipe (offsets stored after the transaction's
// COMMIT, committed by librdkafka's timer) and with a synchronous commit
// after the write; librdkafka's default auto-commit with a slow write fails
// without --crash, a commit being judged when it is made; each other broken
// variant fails with the line that says why.
func TestLibrdkafkaConsumersKeepTheContract(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance kit against librdkafka consumers, killed and restarted: minutes")
	}
	pythonWithLibrdkafka(t)
	dir, err := filepath.Abs(pyDir)
	if err != nil {
		t.Fatal(err)
	}
	bin := pin(t)

	cases := []struct {
		name     string
		consumer string
		flags    string   // the consumer's own flags
		verify   []string // pin contract verify's flags beside --consumer, --effects and --dead-letters
		// fail holds what a FAIL line may contain, one of them; empty: every scenario passes.
		fail []string
		// pass names scenarios that must pass even though another fails.
		pass []string
	}{
		{name: "notifier", consumer: "notifier"},
		{name: "notifier/crash", consumer: "notifier", verify: []string{"--crash"}},
		{name: "billing", consumer: "billing"},
		{name: "billing/crash", consumer: "billing", verify: []string{"--crash"}},
		{name: "billing/commit-sync/crash", consumer: "billing", flags: "--commit sync", verify: []string{"--crash"}},
		// librdkafka's defaults: the offset stored at poll and committed by the
		// 5 s timer while the write is under way. Seen at the commit, without --crash.
		{name: "billing/broken-default-auto-commit", consumer: "billing", flags: "--broken default-auto-commit --slow-write 200-600",
			verify: []string{"--scenario", "steady-stream"}, fail: []string{"committed before its effect was visible"}},
		{name: "notifier/broken-default-auto-commit", consumer: "notifier", flags: "--broken default-auto-commit --slow-write 200-600",
			verify: []string{"--scenario", "steady-stream"}, fail: []string{"committed before its effect was visible"}},
		{name: "notifier/broken-memory-dedupe", consumer: "notifier", flags: "--broken memory-dedupe",
			verify: []string{"--crash", "--scenario", "duplicates"}, fail: []string{"times (want once)"}},
		{name: "billing/broken-memory-dedupe", consumer: "billing", flags: "--broken memory-dedupe",
			verify: []string{"--crash", "--scenario", "duplicates"}, fail: []string{"times (want once)"}},
		// Either check may see it first: the commit ahead of the write, or the
		// effect missing after the kill that followed the commit.
		{name: "billing/broken-commit-before-write", consumer: "billing", flags: "--broken commit-before-write",
			verify: []string{"--crash", "--scenario", "duplicates", "--scenario", "dead-letter-replays"},
			fail:   []string{"committed before its effect was visible", "never performed (want once)"}},
		{name: "notifier/broken-no-version-guard", consumer: "notifier", flags: "--broken no-version-guard",
			verify: []string{"--scenario", "older-after-newer"}, fail: []string{"(a stale record; want none)"}},
		{name: "billing/broken-no-version-guard", consumer: "billing", flags: "--broken no-version-guard",
			verify: []string{"--scenario", "older-after-newer"}, fail: []string{"(a stale record; want none)"}},
		// The consumer exits on Suspended; the line carries why, and the next
		// scenario, with a group of its own, is not failed by it.
		{name: "notifier/broken-raise-on-unknown", consumer: "notifier", flags: "--broken raise-on-unknown",
			verify: []string{"--scenario", "unknown-enum-values", "--scenario", "hostile-records"},
			fail:   []string{"unknown enum value"}, pass: []string{"hostile-records"}},
		{name: "billing/broken-skip-refused", consumer: "billing", flags: "--broken skip-refused",
			verify: []string{"--scenario", "hostile-records"}, fail: []string{"neither acted on nor dead-lettered"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := testbed.NewEmptyDatabase(t)
			script := "./" + c.consumer + ".py"
			consumerCmd := strings.TrimSpace(script + " " + c.flags)
			args := append([]string{"--consumer", consumerCmd,
				"--effects", script + " --effects", "--dead-letters", script + " --dead-letters"}, c.verify...)
			start := time.Now()
			out, code := verifyArgs(t, bin, dir, db.URL, args...)
			t.Logf("pin contract verify %q: exit %d in %s", args, code, time.Since(start).Round(time.Second))
			if len(c.fail) == 0 {
				if code != 0 || strings.Contains(out, "FAIL ") || !strings.Contains(out, "PASS ") {
					t.Fatalf("pin contract verify %q: exit %d, want 0 and every scenario PASS:\n%s", args, code, out)
				}
				return
			}
			if code != 1 {
				t.Fatalf("pin contract verify %q: exit %d, want 1 (a scenario fails):\n%s", args, code, out)
			}
			for _, s := range c.pass {
				if !slices.Contains(strings.Split(out, "\n"), "PASS "+s) {
					t.Errorf("pin contract verify %q: no line PASS %s:\n%s", args, s, out)
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "FAIL ") && slices.ContainsFunc(c.fail, func(why string) bool { return strings.Contains(line, why) }) {
					return
				}
			}
			t.Fatalf("pin contract verify %q: no FAIL line says one of %q:\n%s", args, c.fail, out)
		})
	}
}
