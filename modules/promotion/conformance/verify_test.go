package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/conformance"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
	"github.com/pinmarket/pin/platform/testbed"
)

// referenceConsumer builds testdata/contractconsumer once: a consumer of the
// topic written with franz-go, its dedupe and effects in a log file.
// TestMain removes it.
var referenceConsumer = sync.OnceValues(func() (string, error) {
	bin, remove, err := testbed.BuildBinary(".", "./testdata/contractconsumer", "contractconsumer")
	if err == nil {
		cleanups = append(cleanups, remove)
	}
	return bin, err
})

var cleanups []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}

// verifyRun runs cfg (its Timeout 30 s unless set) and returns its stdout,
// stderr and whether a scenario failed.
func verifyRun(t *testing.T, cfg conformance.Config) (stdout, stderr string, failed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	cfg.Environ = append(cfg.Environ, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	err := conformance.Verify(ctx, cfg)
	if err != nil && !errors.Is(err, conformance.ErrScenariosFailed) {
		t.Fatalf("verify: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), err != nil
}

// reference is a run of the reference consumer in the given mode (its
// flags), with a state file of its own.
func reference(t *testing.T, mode string) conformance.Config {
	t.Helper()
	bin, err := referenceConsumer()
	require.NoError(t, err)
	state := filepath.Join(t.TempDir(), "consumer.log")
	return conformance.Config{
		Consumer:    fmt.Sprintf("%s -state %s %s", bin, state, mode),
		Effects:     fmt.Sprintf("%s -state %s effects", bin, state),
		DeadLetters: fmt.Sprintf("%s -state %s dead-letters", bin, state),
	}
}

// named returns the scenarios of those names.
func named(t *testing.T, names ...string) []scenarios.Scenario {
	t.Helper()
	var out []scenarios.Scenario
	for _, n := range names {
		s, ok := scenarios.Named(n)
		require.True(t, ok, n)
		out = append(out, s)
	}
	return out
}

// passLines are the PASS lines of every scenario run by default.
func passLines() string {
	var lines []string
	for _, s := range scenarios.All() {
		lines = append(lines, "PASS "+s.Name+"\n")
	}
	return strings.Join(lines, "")
}

// TestVerifyPassesAConsumerThatKeepsTheContract: a consumer in its own
// process, through the embedded broker, passes every scenario.
func TestVerifyPassesAConsumerThatKeepsTheContract(t *testing.T) {
	t.Parallel()
	stdout, stderr, failed := verifyRun(t, reference(t, ""))
	require.False(t, failed, stderr)
	require.Equal(t, passLines(), stdout)
}

// TestVerifyCrashPassesAConsumerThatWritesThenCommitsDurably: killed at its
// commits, before and after one is applied, in every scenario, the consumer
// that writes, then commits, and reads its dedupe back passes.
func TestVerifyCrashPassesAConsumerThatWritesThenCommitsDurably(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "")
	cfg.Crash = true
	stdout, stderr, failed := verifyRun(t, cfg)
	require.False(t, failed, stderr)
	require.Equal(t, passLines(), stdout)
	n := len(scenarios.All())
	require.Equal(t, n, strings.Count(stderr, "killed the consumer (SIGKILL) before its offset commit was applied"), stderr)
	require.Equal(t, n, strings.Count(stderr, "killed the consumer (SIGKILL) right after its offset commit was applied"), stderr)
}

// TestVerifyCrashFailsAConsumerThatForgetsItsDedupe: the same consumer with
// its dedupe in memory passes without --crash, and with it acts twice on
// what it wrote before the dropped commit.
func TestVerifyCrashFailsAConsumerThatForgetsItsDedupe(t *testing.T) {
	t.Parallel()
	stdout, stderr, failed := verifyRun(t, reference(t, "-dedupe memory"))
	require.False(t, failed, stderr)
	require.Equal(t, passLines(), stdout)

	cfg := reference(t, "-dedupe memory")
	cfg.Crash, cfg.Scenarios = true, named(t, "duplicates")
	stdout, _, failed = verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL duplicates: effect \{purchase A [0-9a-f-]{36}, Active, v1\} performed 2 times \(want once\); `, stdout)
}

// TestVerifyCrashFailsAConsumerThatCommitsBeforeItWrites: killed right
// after its commit was applied, it never writes what it committed.
func TestVerifyCrashFailsAConsumerThatCommitsBeforeItWrites(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "-commit first")
	cfg.Crash, cfg.Scenarios = true, named(t, "duplicates")
	stdout, _, failed := verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL duplicates: (the effects command printed no effect of any purchase of this run|effect \{purchase [AB] [0-9a-f-]{36}, \w+, v\d\} never performed \(want once\))`, stdout)
}

// TestVerifySaysWhatBroke: a consumer that never commits, an effects
// command that prints something else, and a consumer that exits each fail
// their scenario with a line that says so.
func TestVerifySaysWhatBroke(t *testing.T) {
	t.Parallel()
	stdout, _, failed := verifyRun(t, conformance.Config{Consumer: "sleep 60", Effects: "true", DeadLetters: "true", Timeout: time.Second,
		Scenarios: named(t, "duplicates")})
	require.True(t, failed)
	require.Regexp(t, regexp.MustCompile(`^FAIL duplicates: group pin-contract-verify-\w+ did not commit past the scenario's records within 1s \(partition \d+ at -1 of \d+.*\): does the consumer commit with PIN_CONTRACT_GROUP\?\n$`), stdout)

	cfg := reference(t, "")
	cfg.Effects, cfg.Scenarios = "echo not-an-effect", named(t, "duplicates")
	stdout, _, failed = verifyRun(t, cfg)
	require.True(t, failed)
	require.Equal(t, "FAIL duplicates: the effects command's line 1 is not an effect {\"purchaseId\":\"…\",\"status\":\"…\",\"version\":N}: \"not-an-effect\"\n", stdout)

	stdout, _, failed = verifyRun(t, conformance.Config{Consumer: "exit 3", Effects: "true", DeadLetters: "true", Scenarios: named(t, "duplicates")})
	require.True(t, failed)
	require.Regexp(t, `^FAIL duplicates: the consumer exited \(exit status 3\) before group \S+ committed past the scenario's records`, stdout)
}

// TestVerifyOnBrokersKillsAtRandom: on a cluster it did not start (Brokers,
// the topic already there), the run cannot see the commits, so --crash
// kills at random moments after producing; the consumer that writes, then
// commits, and reads its dedupe back still passes, and the group's dead
// members are taken out so each restart is quick.
func TestVerifyOnBrokersKillsAtRandom(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "")
	cfg.Crash, cfg.Brokers = true, testbed.NewKafka(t, contract.Topic)
	cfg.Scenarios = named(t, "duplicates", "relay-failover")
	stdout, stderr, failed := verifyRun(t, cfg)
	require.False(t, failed, stderr)
	require.Equal(t, "NOTE on --brokers the run cannot see the offset commits: whether a record was committed before its effect was visible was not checked\n"+
		"PASS duplicates\nPASS relay-failover\n", stdout)
	require.Equal(t, 4, strings.Count(stderr, "killed the consumer (SIGKILL) at a random moment"), stderr)
}

// TestVerifySaysWhyTheConsumerExitedAndGoesOn: a consumer that exits on an
// unknown enum value fails that scenario with the end of its stderr; the
// next scenario runs on a fresh group from the topic's end and passes.
func TestVerifySaysWhyTheConsumerExitedAndGoesOn(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "-unknown exit")
	cfg.Scenarios = named(t, "unknown-enum-values", "duplicates")
	stdout, stderr, failed := verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL unknown-enum-values: the consumer exited \(exit status 1\) before group pin-contract-verify-\w+ committed past the scenario's records \(.*\); `+
		`its stderr ended: "contractconsumer: \d/\d+: unknown enum value in \w+/\w+/\w+"\nPASS duplicates\n$`, stdout)
	require.Contains(t, stderr, "starting it again with group pin-contract-verify-")
}

// TestVerifyJudgesDeadLetters: a consumer that dead-letters each record
// outside the contract's bounds passes; one that skips them without a dead
// letter fails, naming each; without --dead-letters the run says refused
// records were judged by effects only.
func TestVerifyJudgesDeadLetters(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "")
	cfg.Scenarios = named(t, "hostile-records", "unknown-enum-values")
	stdout, stderr, failed := verifyRun(t, cfg)
	require.False(t, failed, stderr)
	require.Equal(t, "PASS hostile-records\nPASS unknown-enum-values\n", stdout)

	cfg = reference(t, "-refused skip")
	cfg.Scenarios = named(t, "hostile-records")
	stdout, _, failed = verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL hostile-records: a record with 5000 targets \(partition \d, offset \d+\) was neither acted on nor dead-lettered: `+
		`a record outside the contract's bounds is dead-lettered, naming the rule it broke; a record with 11 targets `, stdout)
	refused := 0
	for _, r := range cfg.Scenarios[0].Records {
		if r.Refuse != nil {
			refused++
		}
	}
	require.Equal(t, refused, strings.Count(stdout, "was neither acted on nor dead-lettered"), stdout)

	cfg.DeadLetters = ""
	stdout, _, failed = verifyRun(t, cfg)
	require.False(t, failed)
	require.Equal(t, "NOTE without --dead-letters, refused records were judged by effects only: one the consumer skipped without dead-lettering it was not caught\n"+
		"PASS hostile-records\n", stdout)

	cfg = reference(t, "")
	cfg.Scenarios = named(t, "unknown-enum-values")
	cfg.DeadLetters = `echo '{"partition":0,"offset":0,"rule":"status: unknown"}'; echo '{"partition":1,"offset":0,"rule":"status: unknown"}'; echo '{"partition":2,"offset":0,"rule":"status: unknown"}'`
	stdout, _, failed = verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL unknown-enum-values: purchase [A-D]'s \w+ \(version \d\) \(partition \d, offset 0\) was dead-lettered \("status: unknown"\), but the contract admits it`, stdout)
}
