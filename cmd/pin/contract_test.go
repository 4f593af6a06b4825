package main_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
	"github.com/pinmarket/pin/platform/testbed"
)

// referenceConsumer builds testdata/contractconsumer once: a consumer of the
// topic written with franz-go, its dedupe and effects in a log file.
// TestMain removes it (removeReferenceConsumer).
var referenceConsumer = sync.OnceValues(func() (string, error) {
	bin, remove, err := testbed.BuildBinary(".", "./testdata/contractconsumer", "contractconsumer")
	if err == nil {
		removeReferenceConsumer = remove
	}
	return bin, err
})

var removeReferenceConsumer = func() {}

// verify runs `pin contract verify` on the reference consumer in the given
// mode (its flags), with a state file of its own.
func verify(t *testing.T, mode string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := referenceConsumer()
	require.NoError(t, err)
	state := filepath.Join(t.TempDir(), "consumer.log")
	consumer := fmt.Sprintf("%s -state %s %s", bin, state, mode)
	effects := fmt.Sprintf("%s -state %s effects", bin, state)
	return run(t, nil, append([]string{"contract", "verify", "--consumer", consumer, "--effects", effects, "--timeout", "30s"}, args...)...)
}

// passLines are the PASS lines of every scenario run by default.
func passLines() string {
	var lines []string
	for _, s := range scenarios.All() {
		lines = append(lines, "PASS "+s.Name+"\n")
	}
	return strings.Join(lines, "")
}

// TestContractVerifyPassesAConsumerThatKeepsTheContract: a consumer in its
// own process, through the embedded broker, passes every scenario.
func TestContractVerifyPassesAConsumerThatKeepsTheContract(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := verify(t, "")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, passLines(), stdout)
}

// TestContractVerifyCrashPassesAConsumerThatWritesThenCommitsDurably: killed
// at its commits, before and after one is applied, in every scenario, the
// consumer that writes, then commits, and reads its dedupe back passes.
func TestContractVerifyCrashPassesAConsumerThatWritesThenCommitsDurably(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := verify(t, "", "--crash")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, passLines(), stdout)
	n := len(scenarios.All())
	require.Equal(t, n, strings.Count(stderr, "killed the consumer (SIGKILL) before its offset commit was applied"), stderr)
	require.Equal(t, n, strings.Count(stderr, "killed the consumer (SIGKILL) right after its offset commit was applied"), stderr)
}

// TestContractVerifyCrashFailsAConsumerThatForgetsItsDedupe: the same
// consumer with its dedupe in memory passes without --crash, and with it
// acts twice on what it wrote before the dropped commit.
func TestContractVerifyCrashFailsAConsumerThatForgetsItsDedupe(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := verify(t, "-dedupe memory")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, passLines(), stdout)

	stdout, _, code = verify(t, "-dedupe memory", "--crash", "--scenario", "duplicates")
	require.Equal(t, 1, code)
	require.Regexp(t, `^FAIL duplicates: effect \{purchase A [0-9a-f-]{36}, Active, v1\} performed 2 times \(want once\); `, stdout)
}

// TestContractVerifyCrashFailsAConsumerThatCommitsBeforeItWrites: killed
// right after its commit was applied, it never writes what it committed.
// Without --crash it may pass (the effects are read once the commit is in,
// and it writes them soon after).
func TestContractVerifyCrashFailsAConsumerThatCommitsBeforeItWrites(t *testing.T) {
	t.Parallel()
	stdout, _, code := verify(t, "-commit first", "--crash", "--scenario", "duplicates")
	require.Equal(t, 1, code)
	require.Regexp(t, `^FAIL duplicates: (the effects command printed no effect of any purchase of this run|effect \{purchase [AB] [0-9a-f-]{36}, \w+, v\d\} never performed \(want once\))`, stdout)
}

// TestContractVerifyUsage: help exits 0, a missing flag 2, an unknown
// scenario 1 naming the scenarios.
func TestContractVerifyUsage(t *testing.T) {
	t.Parallel()
	stdout, _, code := run(t, nil, "contract", "verify", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "Usage: pin contract verify --consumer CMD --effects CMD")
	_, stderr, code := run(t, nil, "contract", "verify", "--consumer", "true")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--consumer and --effects are required")
	_, stderr, code = run(t, nil, "contract", "verify", "--consumer", "true", "--effects", "true", "--scenario", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no scenario "nope" (the scenarios: duplicates, `)
	_, _, code = run(t, nil, "contract", "check")
	require.Equal(t, 2, code)
}

// TestContractVerifySaysWhatBroke: a consumer that never commits, and an
// effects command that prints something else, each fail their scenario
// with a line that says so.
func TestContractVerifySaysWhatBroke(t *testing.T) {
	t.Parallel()
	stdout, _, code := run(t, nil, "contract", "verify", "--consumer", "sleep 60", "--effects", "true",
		"--timeout", "1s", "--scenario", "duplicates")
	require.Equal(t, 1, code)
	require.Regexp(t, regexp.MustCompile(`^FAIL duplicates: group pin-contract-verify-\w+ did not commit past the scenario's records within 1s \(partition \d+ at -1 of \d+.*\): does the consumer commit with PIN_CONTRACT_GROUP\?\n$`), stdout)

	stdout, _, code = verify(t, "", "--scenario", "duplicates", "--effects", "echo not-an-effect")
	require.Equal(t, 1, code)
	require.Equal(t, "FAIL duplicates: the effects command's line 1 is not an effect {\"purchaseId\":\"…\",\"status\":\"…\",\"version\":N}: \"not-an-effect\"\n", stdout)

	stdout, _, code = run(t, nil, "contract", "verify", "--consumer", "exit 3", "--effects", "true", "--scenario", "duplicates")
	require.Equal(t, 1, code)
	require.Regexp(t, `^FAIL duplicates: the consumer exited \(exit status 3\) before group \S+ committed past the scenario's records`, stdout)
}

// TestContractVerifyOnBrokersKillsAtRandom: on a cluster it did not start
// (--brokers, the topic already there), the run cannot see the commits, so
// --crash kills at random moments after producing; the consumer that
// writes, then commits, and reads its dedupe back still passes, and the
// group's dead members are taken out so each restart is quick.
func TestContractVerifyOnBrokersKillsAtRandom(t *testing.T) {
	t.Parallel()
	brokers := testbed.NewKafka(t, topic)
	stdout, stderr, code := verify(t, "", "--crash", "--brokers", strings.Join(brokers, ","),
		"--scenario", "duplicates", "--scenario", "relay-failover")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "PASS duplicates\nPASS relay-failover\n", stdout)
	require.Equal(t, 4, strings.Count(stderr, "killed the consumer (SIGKILL) at a random moment"), stderr)
}
