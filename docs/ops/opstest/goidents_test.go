package opstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goRef is a Go name as the documents cite it, in a code span: `pkg.Name`.
var goRef = regexp.MustCompile("`([a-z][a-z0-9]*)\\.([A-Za-z][A-Za-z0-9]*)[`.(\\[]")

// notOurs are citations of another module's package of the same name as
// one of ours, or of a design a superseded record describes.
var notOurs = map[string]bool{
	"kafka.MessageKeyFromCtx":  true, // watermill-kafka's package kafka
	"outbox.Forwarder":         true, // ADR 0002's forwarder, replaced by the relay (ADR 0008)
	"consumer.ListDeadLetters": true, // ADR 0029's list of the names its rooms replaced
}

// sqlSchemas are package names that are also PostgreSQL schemas: a
// lower-case name after them is a table (`outbox.dead_letters`), not Go.
var sqlSchemas = map[string]bool{"promotion": true, "outbox": true, "consumer": true, "boost": true}

// goPackages maps each package name of the repository that only one
// directory has to the names declared at its top level (methods too).
func goPackages(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	names := map[string]map[string]bool{}
	dirs := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir // npm's, written while the examples' test runs
		}
		if err == nil && d.IsDir() && d.Name() == "testdata" {
			// Planted packages (archrules') that Go never builds: their
			// names would make ours ambiguous and unchecked.
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		if names[pkg] == nil {
			names[pkg] = map[string]bool{}
		}
		dirs[pkg+"\x00"+filepath.Dir(path)]++
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				names[pkg][d.Name.Name] = true
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[pkg][s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[pkg][n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	perName := map[string]int{}
	for k := range dirs {
		pkg, _, _ := strings.Cut(k, "\x00")
		perName[pkg]++
	}
	for pkg, n := range perName {
		if n > 1 || pkg == "main" {
			delete(names, pkg) // ambiguous: a citation cannot say which
		}
	}
	return names
}

// unknownGoRefs returns the `pkg.Name` citations of text whose package is
// one of packages and which that package does not declare.
func unknownGoRefs(text string, packages map[string]map[string]bool) []string {
	var unknown []string
	for _, m := range goRef.FindAllStringSubmatch(text, -1) {
		pkg, name := m[1], m[2]
		declared, ok := packages[pkg]
		if !ok || (sqlSchemas[pkg] && strings.ToLower(name[:1]) == name[:1]) {
			continue
		}
		if !declared[name] && !notOurs[pkg+"."+name] {
			unknown = append(unknown, pkg+"."+name)
		}
	}
	return unknown
}

// TestCitedGoNamesExist reads the README and every document under docs/:
// each Go name they cite as `pkg.Name`, for a package of this repository,
// is declared there, so a reader sent to a type or function finds it.
func TestCitedGoNamesExist(t *testing.T) {
	t.Parallel()
	packages := goPackages(t, repoRoot)
	require.Contains(t, packages, "app", "the module's app package is indexed")
	var found []string
	check := func(path string) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(repoRoot, path)
		for _, ref := range unknownGoRefs(string(raw), packages) {
			found = append(found, rel+": "+ref)
		}
	}
	check(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".md" {
			check(path)
		}
		return err
	}))
	require.Empty(t, found, "documents cite Go names that do not exist")
	require.Equal(t, []string{"expiry.ExpireDeps"},
		unknownGoRefs("built from `expiry.ExpireDeps`; `expiry.ExpireSettings` and the table `outbox.dead_letters`", packages),
		"the check finds a planted citation of a name that does not exist")
}
