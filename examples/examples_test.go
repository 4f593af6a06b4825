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
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"contract", "verify",
		"--consumer", consumerCmd, "--effects", effectsCmd, "--crash"}, args...)...)
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
		t.Logf("stderr of pin contract verify --consumer %q:\n%s", consumerCmd, tail(stderr.String(), 4000))
	}
	return stdout.String(), code
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
