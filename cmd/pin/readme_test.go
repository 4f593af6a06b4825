package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// readmeWalk returns the shell blocks of the README's section "A first
// purchase, step by step", in order.
func readmeWalk(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## A first purchase, step by step\n")
	require.True(t, ok, "the README's walk")
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		var block string
		if _, section, ok = strings.Cut(section, "```sh\n"); !ok {
			break
		}
		block, section, _ = strings.Cut(section, "```")
		blocks = append(blocks, block)
	}
	require.GreaterOrEqual(t, len(blocks), 2, "the walk and the cancellation")
	return blocks
}

// withoutKcat drops the kcat commands (and their continuation lines) from
// script, for a machine without kcat: the rest must still run.
func withoutKcat(script string) string {
	var out []string
	continued := false
	for _, line := range strings.Split(script, "\n") {
		skip := continued || strings.HasPrefix(line, "kcat ")
		continued = skip && strings.HasSuffix(line, `\`)
		if !skip {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestReadmeWalkPastesIntoThePinDevShell pastes, as a reader does, the
// `export` lines `pin dev` prints and then every shell block of the
// README's walk into one bash (-euo pipefail) that knows nothing else: each
// command runs as written, under the names the banner exports (the same as
// the runbooks'), the purchase expires, the second one is cancelled (not a
// 400), and `pin status` names the relay's leader.
func TestReadmeWalkPastesIntoThePinDevShell(t *testing.T) {
	t.Parallel()
	testbed.Tool(t, "jq", "Debian: apt-get install -y jq")
	db := testbed.NewDatabase(t)
	s, _ := startDevWithBroker(t, db)
	var exports []string
	// Ready is no promise that the whole banner has come through the pipe yet.
	testbed.Eventually(t, func() error {
		exports = nil
		for _, line := range strings.Split(s.out.String(), "\n") {
			if strings.HasPrefix(line, "  export ") {
				exports = append(exports, strings.TrimSpace(line))
			}
		}
		if !strings.Contains(s.out.String(), "kcat -C") {
			return fmt.Errorf("no whole banner yet:\n%s", s.out.String())
		}
		return nil
	})
	require.Len(t, exports, 6, "the banner's export lines:\n%s", s.out.String())
	walk := strings.Join(readmeWalk(t), "\n")
	kcat := bannerKcatLine(t, s.out.String())
	require.Contains(t, walk, "\n"+kcat+"\n", "the README's walk reads the events with the line pin dev prints")
	script := strings.Join(exports, "\n") + "\n" + walk
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("kcat not found: its commands are left out")
		script = withoutKcat(script)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's walk, pasted:\n%s\n%s", script, out)
	for _, says := range []string{`"expired":1`, `"Expired"`, `"Cancelled"`, "relay leader: pin/"} {
		require.Contains(t, string(out), says, "the walk's output:\n%s", out)
	}
	require.Regexp(t, `consumer\s+boost: .*, lag \d+,`, string(out), "pin status finds the broker in the pasted shell")
}

// bannerKcatLine returns the kcat command the `pin dev` banner prints.
func bannerKcatLine(t *testing.T, banner string) string {
	t.Helper()
	for _, line := range strings.Split(banner, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "kcat ") {
			return line
		}
	}
	require.Fail(t, "the banner prints no kcat line", banner)
	return ""
}
