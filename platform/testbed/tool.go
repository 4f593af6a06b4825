package testbed

import (
	"os"
	"os/exec"
	"testing"
)

// RequireToolsEnv, set to 1 by .ci/run, turns a missing external client into
// a test failure: in CI a cross-check that silently skips is a cross-check
// that never runs.
const RequireToolsEnv = "PIN_REQUIRE_EXTERNAL_TOOLS"

// Tool returns the path of the command name, an independent client a test
// checks against (kcat, promtool). When it is missing the test fails if
// PIN_REQUIRE_EXTERNAL_TOOLS=1 and is skipped otherwise; install says how to
// get it.
func Tool(tb testing.TB, name, install string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		tb.Fatalf("%s is required (%s=1) but not found: %v; install: %s", name, RequireToolsEnv, err, install)
	}
	tb.Skipf("%s not found (install: %s); skipping. With %s=1, as in CI, this fails instead.", name, install, RequireToolsEnv)
	return ""
}
