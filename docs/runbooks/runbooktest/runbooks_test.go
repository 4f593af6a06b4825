package runbooktest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// Paths relative to this package.
const (
	repoRoot   = "../../.."
	runbookDir = ".."
)

// pinBin is the pin binary built from this tree: `pin` on the PATH of the
// shell blocks, as in the shell `pin dev`'s export lines make.
var pinBin string

func TestMain(m *testing.M) {
	bin, remove, err := testbed.BuildBinary(repoRoot, "./cmd/pin", "pin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pinBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// runbookBlocks parses every runbook of docs/runbooks, failing t for each
// problem found (a fence without a language, an unreadable annotation).
func runbookBlocks(t *testing.T) []Block {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(runbookDir, "*.md"))
	require.NoError(t, err)
	var blocks []Block
	for _, p := range paths {
		if filepath.Base(p) == "README.md" {
			continue // the conventions, whose examples are not steps
		}
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		bs, errs := ParseBlocks("docs/runbooks/"+filepath.Base(p), string(raw))
		for _, err := range errs {
			t.Error(err)
		}
		blocks = append(blocks, bs...)
	}
	require.NotEmpty(t, blocks, "no blocks found under %s", runbookDir)
	return blocks
}

// TestEveryRunbookBlockRuns executes every shell and SQL block of the
// runbooks on a fresh database put into the state its annotation names,
// and checks what it promises (docs/runbooks/README.md). A block without an
// annotation fails the test; a block marked skip is listed with its reason.
func TestEveryRunbookBlockRuns(t *testing.T) {
	t.Parallel()
	var cannotRun []string
	for _, b := range runbookBlocks(t) {
		if !b.Runs() {
			continue
		}
		if b.Test == nil {
			t.Errorf("%s: a ```%s block with no fixture: put <!-- runbook-test: state=NAME expect=rows|ok --> on the line before it, "+
				"or <!-- runbook-test: skip=\"why it cannot run here\" --> (docs/runbooks/README.md). The states:%s",
				b.Where(), b.Lang, stateList())
			continue
		}
		if b.Test.Skip != "" {
			cannotRun = append(cannotRun, b.Where()+": "+b.Test.Skip)
		}
		t.Run(subtestName(b), func(t *testing.T) {
			if b.Test.Skip != "" {
				t.Skipf("%s cannot run here: %s", b.Where(), b.Test.Skip)
			}
			t.Parallel()
			runBlock(t, b)
		})
	}
	for _, c := range cannotRun {
		t.Logf("not run (cannot run here): %s", c)
	}
}

// oldPoisonQuery is the runbook's query for a poison purchase's targets as
// it was written for the outbox layout before migration 00003: each event
// base64-encoded in an envelope, the key inside it.
const oldPoisonQuery = `SELECT m.created_at,
       convert_from(decode(m.payload->>'payload', 'base64'), 'UTF8')::json #> '{payload,targets}' AS targets
FROM outbox."pin_promotion_purchase_changed_v1" m
WHERE m.payload->'metadata'->>'partition_key' = '<purchase_id>'
ORDER BY m."offset";`

// TestExpectRowsCatchesTheOldPoisonQuery runs the query the runbook had for
// a poison purchase's targets on a database in state poison: on today's
// layout it finds nothing, without an error, and expect=rows says so.
func TestExpectRowsCatchesTheOldPoisonQuery(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	states["poison"].build(t, w)
	script, missing := Fill(oldPoisonQuery, w.values)
	require.Empty(t, missing)
	_, nothing, err := execSQL(w.db.URL, script)
	require.NoError(t, err, "the old query fails silently, not with an error")
	require.Equal(t, []string{"statement 1 (SELECT 0) returned no row with a value"}, nothing)
}

// subtestName is file:line, so a failure points at the block.
func subtestName(b Block) string {
	return fmt.Sprintf("%s:%d", strings.TrimSuffix(filepath.Base(b.File), ".md"), b.Line)
}

// runBlock puts a fresh database into the block's state, runs the block
// with the state's placeholder values, and checks its expectation.
func runBlock(t *testing.T, b Block) {
	t.Helper()
	a := b.Test
	for _, tool := range a.Needs {
		testbed.Tool(t, tool, "Debian: apt-get install -y "+tool)
	}
	fx, ok := states[a.State]
	require.True(t, ok, "%s: unknown state %q; a new one goes into the states table of states_test.go. The states:%s", b.Where(), a.State, stateList())
	w := newWorld(t)
	fx.build(t, w)
	script, missing := Fill(b.Script(), w.values)
	require.Empty(t, missing, "%s: state %q gives no value for these placeholders", b.Where(), a.State)
	var out string
	if b.IsSQL() {
		out = runSQL(t, w, b, script)
	} else {
		out = runShell(t, w, b, script)
	}
	if a.Match != "" {
		pattern, missing := Fill(a.Match, w.values)
		require.Empty(t, missing, "%s: state %q gives no value for these placeholders of match=", b.Where(), a.State)
		require.Regexp(t, regexp.MustCompile(pattern), out, "%s: the output does not match %q:\n%s", b.Where(), pattern, script)
	}
}

// runShell runs script with bash -euo pipefail, pin on the PATH,
// PIN_DATABASE_URL, and BROKER, PIN_KAFKA_BROKERS where the state has a
// broker; where it runs a `pin dev`, after that banner's export lines
// alone (BASE, BROKER, PIN_KAFKA_BROKERS…), so a block uses no name the
// banner does not set. It returns stdout.
func runShell(t *testing.T, w *world, b Block, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if len(w.exports) > 0 {
		script = strings.Join(w.exports, "\n") + "\n" + script
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"PATH=" + filepath.Dir(pinBin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"PIN_DATABASE_URL=" + w.db.URL,
	}
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "%s:\n%s\nstdout:\n%s\nstderr:\n%s", b.Where(), script, stdout.String(), stderr.String())
	if b.Test.Expect == ExpectRows {
		require.NotEmpty(t, strings.TrimSpace(stdout.String()),
			"%s: the runbook promises output, the block printed nothing:\n%s\nstderr:\n%s", b.Where(), script, stderr.String())
	}
	t.Logf("%s:\n%s\n→\n%s", b.Where(), script, stdout.String())
	return stdout.String()
}

// runSQL runs script on the state's database and checks the block's
// expectation; it returns the output execSQL renders.
func runSQL(t *testing.T, w *world, b Block, script string) string {
	t.Helper()
	out, nothing, err := execSQL(w.db.URL, script)
	require.NoError(t, err, "%s:\n%s", b.Where(), script)
	t.Logf("%s:\n%s\n→\n%s", b.Where(), script, out)
	if b.Test.Expect == ExpectRows {
		require.Empty(t, nothing, "%s: the runbook promises rows in state %q:\n%s", b.Where(), b.Test.State, script)
	}
	return out
}

// execSQL runs script as one simple-protocol query, as psql sends what an
// operator pastes. It returns the results as text (each statement's
// command tag, then its rows, one a line, tab-separated) and, for
// expect=rows, the statements that returned or changed nothing.
func execSQL(url, script string) (out string, nothing []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	results, err := conn.PgConn().Exec(ctx, script).ReadAll()
	if err != nil {
		return "", nil, err
	}
	var text strings.Builder
	for i, r := range results {
		if r.Err != nil {
			return text.String(), nil, fmt.Errorf("statement %d: %w", i+1, r.Err)
		}
		fmt.Fprintln(&text, r.CommandTag.String())
		carries := false
		for _, row := range r.Rows {
			vals := make([]string, len(row))
			for j, v := range row {
				if v == nil {
					vals[j] = "NULL"
					continue
				}
				vals[j] = string(v)
				if !slices.Contains([]string{"", "0", "{}"}, vals[j]) {
					carries = true
				}
			}
			fmt.Fprintln(&text, strings.Join(vals, "\t"))
		}
		tag := r.CommandTag
		switch {
		case (tag.Select() || len(r.FieldDescriptions) > 0) && !carries: // Read leaves FieldDescriptions nil without rows
			nothing = append(nothing, fmt.Sprintf("statement %d (%s) returned no row with a value", i+1, tag))
		case (tag.Insert() || tag.Update() || tag.Delete()) && tag.RowsAffected() == 0:
			nothing = append(nothing, fmt.Sprintf("statement %d (%s) changed no row", i+1, tag))
		}
	}
	return text.String(), nothing, nil
}

// stateList lists the states an annotation may name, one a line with what
// it holds.
func stateList() string {
	var list strings.Builder
	for _, name := range slices.Sorted(maps.Keys(states)) {
		fmt.Fprintf(&list, "\n  %s: %s", name, states[name].describe)
	}
	return list.String()
}
