package contract_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// contractImportPath is this package.
const contractImportPath = "github.com/pinmarket/pin/modules/promotion/contract"

// allowedDeps are the only non-standard packages the contract may pull into
// a consumer's build: the types its fields are made of. Anything else — the
// module's internal packages, GORM, Echo, Watermill, the platform — would leak
// the producer's implementation into every consumer.
var allowedDeps = []string{
	"github.com/google/uuid",
	"github.com/shopspring/decimal",
}

// unexpectedDeps returns the packages of deps outside allowedDeps (the
// package itself aside).
func unexpectedDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if d == "" || d == contractImportPath {
			continue
		}
		ok := false
		for _, a := range allowedDeps {
			if d == a || strings.HasPrefix(d, a+"/") {
				ok = true
			}
		}
		if !ok {
			bad = append(bad, d)
		}
	}
	return bad
}

// TestContractDependsOnNothingElse lists the non-test dependencies of the
// package with `go list -deps` and checks them against allowedDeps.
func TestContractDependsOnNothingElse(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH; cannot list dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", contractImportPath).CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Contains(t, deps, contractImportPath, "go list answered for the wrong package")
	require.Empty(t, unexpectedDeps(deps))
}

// TestUnexpectedDepsCanFail proves the rule above reports planted imports.
func TestUnexpectedDepsCanFail(t *testing.T) {
	t.Parallel()
	planted := []string{
		"github.com/pinmarket/pin/modules/promotion/internal/domain",
		"gorm.io/gorm",
		"github.com/labstack/echo/v4",
		"github.com/ThreeDotsLabs/watermill/message",
		"github.com/pinmarket/pin/platform/outbox",
		"github.com/google/uuidx",
	}
	clean := []string{contractImportPath, "github.com/google/uuid", "github.com/shopspring/decimal"}
	require.Equal(t, planted, unexpectedDeps(append(clean, planted...)))
	require.Empty(t, unexpectedDeps(clean))
}
