package opstest

import (
	"os"
	"os/exec"
	"testing"
)

// requireExternalToolsEnv, set to 1 by .ci/run, turns a missing external
// client into a test failure: in CI a cross-check that silently skips is a
// cross-check that never runs.
const requireExternalToolsEnv = "PIN_REQUIRE_EXTERNAL_TOOLS"

// externalTool returns the path of the command name, an independent client
// a test checks against. When it is missing the test fails if
// PIN_REQUIRE_EXTERNAL_TOOLS=1 and is skipped otherwise; install says how
// to get it.
func externalTool(tb testing.TB, name, install string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(requireExternalToolsEnv) == "1" {
		tb.Fatalf("%s is required (%s=1) but not found: %v; install: %s", name, requireExternalToolsEnv, err, install)
	}
	tb.Skipf("%s not found (install: %s); skipping. With %s=1, as in CI, this fails instead.", name, install, requireExternalToolsEnv)
	return ""
}
