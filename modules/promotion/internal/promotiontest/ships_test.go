package promotiontest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const promotiontestPath = "github.com/pinmarket/pin/modules/promotion/internal/promotiontest"

// shippingImporters returns the packages of a `go list` listing (lines
// "importpath: dep dep ...", non-test dependencies only) that pull
// promotiontest into code that ships.
func shippingImporters(listing string) []string {
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		if pkg == promotiontestPath {
			continue
		}
		for _, d := range strings.Fields(deps) {
			if d == promotiontestPath {
				bad = append(bad, pkg)
			}
		}
	}
	return bad
}

// TestOnlyTestsImportPromotiontest: no package of the module depends on
// this one outside its _test.go files (go list -deps leaves test files out).
func TestOnlyTestsImportPromotiontest(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH; cannot list dependencies")
	}
	out, err := exec.Command(goBin, "list", "-e", "-f", `{{.ImportPath}}: {{join .Deps " "}}`,
		"github.com/pinmarket/pin/modules/promotion/...").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), promotiontestPath+":", "go list answered for the wrong packages")
	require.Contains(t, string(out), "github.com/pinmarket/pin/modules/promotion: ", "go list answered for the wrong packages")
	require.Empty(t, shippingImporters(string(out)))
}

// TestShippingImportersCanFail proves the rule above reports a planted
// import.
func TestShippingImportersCanFail(t *testing.T) {
	t.Parallel()
	listing := "github.com/pinmarket/pin/modules/promotion: github.com/google/uuid " + promotiontestPath + "\n" +
		promotiontestPath + ": github.com/google/uuid\n" +
		"github.com/pinmarket/pin/modules/promotion/internal/domain: github.com/google/uuid\n"
	require.Equal(t, []string{"github.com/pinmarket/pin/modules/promotion"}, shippingImporters(listing))
}
