package runbooktest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// unloggedMessages returns, as "file: message", the log messages the
// runbooks quote that no slog call of the code logs.
func unloggedMessages(t *testing.T, runbooks map[string]string, logged map[string]bool) []string {
	t.Helper()
	var unknown []string
	for file, doc := range runbooks {
		for _, msg := range QuotedLogMessages(doc) {
			if !logged[msg] {
				unknown = append(unknown, file+": "+msg)
			}
		}
	}
	return unknown
}

func readRunbooks(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(runbookDir, "*.md"))
	require.NoError(t, err)
	docs := map[string]string{}
	for _, p := range paths {
		if filepath.Base(p) == "README.md" {
			continue // the conventions, with made-up examples
		}
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		docs["docs/runbooks/"+filepath.Base(p)] = string(raw)
	}
	return docs
}

// TestQuotedLogMessagesAreLogged: every log message a runbook quotes
// (docs/runbooks/README.md says how one is quoted) is the message of a
// slog call in the code, so an operator who searches the logs for it can
// find it.
func TestQuotedLogMessagesAreLogged(t *testing.T) {
	t.Parallel()
	logged, err := LoggedMessages(repoRoot)
	require.NoError(t, err)
	runbooks := readRunbooks(t)
	// The extraction finds what the runbooks are known to quote, so a
	// convention that matches nothing does not pass by default.
	require.Contains(t, QuotedLogMessages(runbooks["docs/runbooks/kafka.md"]), "outbox relay paused")
	require.Contains(t, QuotedLogMessages(runbooks["docs/runbooks/expire-promotions.md"]), "cycle failed")
	require.Contains(t, QuotedLogMessages(runbooks["docs/runbooks/boost-consumer.md"]), "record dead-lettered")
	require.Empty(t, unloggedMessages(t, runbooks, logged), "quoted in a runbook as a log message, but logged nowhere in the code")
}

// TestUnloggedMessageIsReported plants a runbook quoting the relay's old
// message: the check reports it, and passes the message the relay logs.
func TestUnloggedMessageIsReported(t *testing.T) {
	t.Parallel()
	logged, err := LoggedMessages(repoRoot)
	require.NoError(t, err)
	require.True(t, logged["outbox relay paused"], "a message of a WarnContext call in platform/outbox")
	require.True(t, logged["cycle started"], "a message of an InfoContext call in the expiry job")
	planted := map[string]string{"planted.md": "The relay logs `outbox forwarder paused` and retries.\n" +
		"| events waiting | log `outbox relay paused` |\n"}
	require.Equal(t, []string{"planted.md: outbox forwarder paused"}, unloggedMessages(t, planted, logged))
}

// TestQuotedLogMessagesConvention shows each way a runbook quotes a log
// message, and backticked text that is not one.
func TestQuotedLogMessagesConvention(t *testing.T) {
	t.Parallel()
	doc := "Pauses (log `a paused`, with `topic`) and logs `b failed`.\n" +
		"Each is one `c restarting` line; a DEBUG line `d dropped`; the `e failed` log lines.\n" +
		"Entries with `\"msg\":\"f failed\"` carry `purchase_id`.\n" +
		"| logs (JSON) | `g started` (as_of), `h done` |\n" +
		"| metric | `pin_outbox_published_total` grows, `SELECT 1` |\n"
	require.ElementsMatch(t, []string{"a paused", "b failed", "c restarting", "d dropped", "e failed", "f failed", "g started", "h done"},
		QuotedLogMessages(doc))
}
