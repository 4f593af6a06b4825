package main_test

import (
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// commandWord is a word of a command's name in `pin help` (a subcommand, or
// alternatives such as up|down|status); arguments and flags are upper case
// or start with '-'.
var commandWord = regexp.MustCompile(`^[a-z][a-z-]*(\|[a-z][a-z-]*)*$`)

// commandsOf reads the command names out of `pin help`'s usage, each
// nested command with the commands above it (migrate, migrate up, …).
func commandsOf(usage string) [][]string {
	var out [][]string
	add := func(cmd []string) {
		if !slices.ContainsFunc(out, func(c []string) bool { return slices.Equal(c, cmd) }) {
			out = append(out, cmd)
		}
	}
	for _, line := range strings.Split(usage, "\n") {
		synopsis, _, _ := strings.Cut(strings.TrimSpace(line), "  ") // the description follows two spaces
		words := strings.Fields(synopsis)
		if len(words) < 2 || words[0] != "pin" || strings.HasPrefix(words[1], "-") {
			continue
		}
		paths := [][]string{nil}
		for _, w := range words[1:] {
			if !commandWord.MatchString(w) || w == "help" {
				break
			}
			var next [][]string
			for _, p := range paths {
				for _, alt := range strings.Split(w, "|") {
					next = append(next, append(slices.Clone(p), alt))
				}
			}
			paths = next
			for _, p := range paths {
				add(p)
			}
		}
	}
	return out
}

func TestCommandsOfReadsNestedCommands(t *testing.T) {
	t.Parallel()
	require.Equal(t, [][]string{{"serve"}, {"migrate"}, {"migrate", "up"}, {"migrate", "down"}, {"outbox"},
		{"outbox", "dead-letters"}, {"outbox", "dead-letters", "replay"}, {"token"}},
		commandsOf(`Usage:
  pin serve                 HTTP API and the relay
  pin migrate up|down       apply or revert
  pin outbox dead-letters replay ID...|--all  put them back
  pin token --tenant UUID   print a JWT
  pin --version
Each command's flags: pin COMMAND --help.`))
}

// TestEveryCommandsHelpExitsZero asks each command `pin help` lists, nested
// ones and the commands above them included, for its help with --help and
// -h: it prints its usage on stdout, exits 0 and starts nothing (serve and
// dev get an environment they would start with).
func TestEveryCommandsHelpExitsZero(t *testing.T) {
	t.Parallel()
	usage, _, code := run(t, nil, "help")
	require.Equal(t, 0, code)
	commands := commandsOf(usage)
	require.Contains(t, commands, []string{"migrate", "up"}, "nested commands are found")
	env := []string{"PIN_KAFKA_BROKERS=127.0.0.1:1", "PIN_AUTH_JWT_SECRET=" + jwtSecret, "PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
		"PIN_DATABASE_URL=postgres://postgres@127.0.0.1:1/none?sslmode=disable"}
	for _, cmd := range commands {
		for _, flag := range []string{"--help", "-h"} {
			args := append(slices.Clone(cmd), flag)
			out, stderr, code := run(t, env, args...)
			require.Equal(t, 0, code, "pin %v: %s", args, stderr)
			require.Empty(t, stderr, "pin %v starts nothing and logs nothing", args)
			require.True(t, strings.HasPrefix(out, "Usage: pin "+strings.Join(cmd, " ")), "pin %v: %s", args, out)
		}
	}
}

// TestServeAndDevHelpSayWhatTheyNeed: the help of serve and dev names the
// variables each one needs, not only "see README.md".
func TestServeAndDevHelpSayWhatTheyNeed(t *testing.T) {
	t.Parallel()
	for cmd, vars := range map[string][]string{
		"serve": {"PIN_DATABASE_URL", "PIN_KAFKA_BROKERS", "PIN_AUTH_JWT_SECRET", "PIN_HTTP_ADDR", "exits 1"},
		"dev":   {"PIN_DATABASE_URL", "PIN_DEV_KAFKA_ADDR", "PIN_AUTH_JWT_SECRET", "PIN_HTTP_ADDR"},
	} {
		out, _, code := run(t, nil, cmd, "--help")
		require.Equal(t, 0, code)
		for _, v := range vars {
			require.Contains(t, out, v, "pin %s --help", cmd)
		}
	}
}

// TestVersionSaysWhatBuiltIt runs the test binary, built by a plain go build
// (on the build machines GOFLAGS holds -buildvcs=false: no VCS stamp), so it
// reports a release version, the commit when known, and the Go that built it.
func TestVersionSaysWhatBuiltIt(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		stdout, stderr, code := run(t, nil, arg)
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `^pin v\d+\.\d+\.\d+\S* \(revision \S+, `+regexp.QuoteMeta(runtime.Version())+`\)\n$`, stdout)
	}
}
