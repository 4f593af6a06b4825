package main

import (
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// Every test database of this package (the black-box tests' too: one test
// binary) has the outbox tables `pin migrate up` makes for the list.
func init() { testbed.DeclareTopics(declaredTopics()...) }

// theList are the files that name modules: the list, and its test-only
// addition.
var theList = []string{"modules.go", "modules_testonly.go"}

// moduleImports returns, for each non-test Go file of dir but those of
// theList, the packages under modules/ it imports.
func moduleImports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	found := map[string][]string{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") || slices.Contains(theList, name) {
			continue
		}
		file, err := parser.ParseFile(gotoken.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range file.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if strings.HasPrefix(path, "github.com/pinmarket/pin/modules/") || strings.Contains(path, "/testdata/modules/") {
				found[name] = append(found[name], path)
			}
		}
	}
	return found
}

// TestOnlyTheListNamesModules: no file of cmd/pin but the list imports a
// module, so a module is added in one place.
func TestOnlyTheListNamesModules(t *testing.T) {
	t.Parallel()
	require.Empty(t, moduleImports(t, "."), "reach a module through modules.go's list")
}

// The rule sees a file that imports a module.
func TestOnlyTheListNamesModulesFailsOnAPlantedImport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planted := "package main\n\nimport _ \"github.com/pinmarket/pin/modules/boost\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "serve.go"), []byte(planted), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "modules.go"), []byte(planted), 0o600))
	require.Equal(t, map[string][]string{"serve.go": {"github.com/pinmarket/pin/modules/boost"}}, moduleImports(t, dir))
}
