package conformance_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// pinBinary builds cmd/pin once, for the tests that signal a run.
var pinBinary = sync.OnceValues(func() (string, error) {
	bin, remove, err := testbed.BuildBinary("../../..", "./cmd/pin", "pin")
	if err == nil {
		cleanups = append(cleanups, remove)
	}
	return bin, err
})

// marked lists the processes whose environment holds mark=<value>, as
// "pid cmdline". The tests put a mark of their own in the run's
// environment: every command and its children inherit it.
func marked(mark string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, dir := range dirs {
		environ, err := os.ReadFile(dir + "/environ")
		if err != nil || !bytes.Contains(environ, []byte(mark)) {
			continue
		}
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		out = append(out, filepath.Base(dir)+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

// newMark is an environment entry that marks a test's processes.
func newMark() string { return "PIN_TEST_MARK=" + uuid.NewString() }

// TestVerifyBoundsAHangingEffectsCommand: an effects command whose child
// holds the output pipe ends with the timeout, its child with it, and the
// scenario fails saying so.
func TestVerifyBoundsAHangingEffectsCommand(t *testing.T) {
	t.Parallel()
	mark := newMark()
	cfg := reference(t, "")
	cfg.Effects, cfg.Timeout, cfg.Scenarios, cfg.Environ = "sleep 40; echo x", 3*time.Second, named(t, "duplicates"), []string{mark}
	start := time.Now()
	stdout, _, failed := verifyRun(t, cfg)
	took := time.Since(start)
	require.True(t, failed)
	require.Regexp(t, `^FAIL duplicates: (at an offset commit, )?the effects command did not finish within 3s \(--timeout\); it was killed with its process group`, stdout)
	require.Less(t, took, 20*time.Second, "the consumer's start and commit, then 3 s for the effects")
	require.Empty(t, marked(mark))
}

// TestVerifyCapsTheEffectsOutput: an effects command that prints more than
// the cap fails the scenario, naming the cap.
func TestVerifyCapsTheEffectsOutput(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "")
	cfg.Effects, cfg.Scenarios = `head -c 20000000 /dev/zero | tr '\0' x`, named(t, "duplicates")
	stdout, _, failed := verifyRun(t, cfg)
	require.True(t, failed)
	require.Equal(t, "FAIL duplicates: the effects command printed more than 16 MiB, the most a run of it may print\n", stdout)
}

// TestVerifySweepsWhatLeftItsProcessGroup: a process the consumer started
// in a session of its own outlives the consumer's process group; the run
// kills it at the end and says so.
func TestVerifySweepsWhatLeftItsProcessGroup(t *testing.T) {
	t.Parallel()
	testbed.Tool(t, "setsid", "apt-get install util-linux")
	mark := newMark()
	cfg := reference(t, "")
	cfg.Consumer = "setsid sleep 300 & exec " + cfg.Consumer
	cfg.Scenarios, cfg.Environ = named(t, "duplicates"), []string{mark}
	stdout, stderr, failed := verifyRun(t, cfg)
	require.False(t, failed, stderr)
	require.Regexp(t, `^PASS duplicates\nNOTE pid \d+ \("sleep 300"\) was still running after the run, outside the process group of the command that started it; killed it\n$`, stdout)
	require.Empty(t, marked(mark))
}

// TestVerifyEndsOnASignalWithin2s: SIGINT or SIGTERM to `pin contract
// verify` while its effects command hangs ends the run within 2 s, and
// nothing it started is left running.
func TestVerifyEndsOnASignalWithin2s(t *testing.T) {
	t.Parallel()
	pin, err := pinBinary()
	require.NoError(t, err)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			mark := newMark()
			ref := reference(t, "")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, pin, "contract", "verify", "--consumer", ref.Consumer,
				"--effects", "sleep 40; echo x", "--timeout", "60s", "--scenario", "duplicates")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), mark}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			hanging := regexp.MustCompile(`^\d+ sleep 40 $`)
			require.Eventually(t, func() bool {
				for _, p := range marked(mark) {
					if hanging.MatchString(p) {
						return true
					}
				}
				return false
			}, time.Minute, 20*time.Millisecond, "the effects command never ran")
			start := time.Now()
			require.NoError(t, cmd.Process.Signal(sig))
			_ = cmd.Wait()
			took := time.Since(start)
			require.Less(t, took, 2*time.Second, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			require.Equal(t, 1, cmd.ProcessState.ExitCode())
			require.True(t, strings.Contains(stderr.String(), "contract verify: stopped before scenario duplicates was judged"), stderr.String())
			require.Empty(t, marked(mark))
		})
	}
}
