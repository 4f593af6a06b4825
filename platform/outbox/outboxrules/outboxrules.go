// Package outboxrules checks the rules every module that publishes through
// the outbox must keep, on the module's source: each statement that hands
// the outbox its events calls outbox.publish in a CTE its final SELECT
// reads (ADR 0025), and no file names the outbox's layout (ADR 0024). Its
// test runs them over every module of the repository; a module's own test
// may run CheckModule too.
package outboxrules

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// publishCall is how a statement hands its events to the outbox: in a CTE,
// with the ids of the rows it wrote, read by the final SELECT.
var publishCall = regexp.MustCompile(`(\w+) AS \(\s*SELECT outbox\.publish\(@events::text\[\], ARRAY\(SELECT id::text FROM (\w+)\)\)\s*\)\s*SELECT id FROM (\w+), (\w+)\s*$`)

// CheckPublishes says what is wrong with query, a statement that writes
// events. PostgreSQL never runs a SELECT CTE that nothing reads, so a
// final SELECT that leaves the publication out stores no event, silently.
func CheckPublishes(query string) error {
	if strings.Contains(query, "INTO outbox") {
		return errors.New("it inserts into the outbox itself: rows go in only through outbox.publish")
	}
	m := publishCall.FindStringSubmatch(query)
	if m == nil {
		return errors.New("no CTE `x AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM <written>)))` " +
			"followed by the final `SELECT id FROM <written>, x`")
	}
	if m[3] != m[2] || m[4] != m[1] {
		return fmt.Errorf("the final SELECT reads %s, %s: it must read %s, the rows announced, and %s, the publication", m[3], m[4], m[2], m[1])
	}
	return nil
}

// layout are what only platform/outbox may know of the outbox's tables and
// their encoding.
var layout = []string{"outbox.TableName", "outbox.RowSeparator", "outbox.Schema", "INTO outbox", "outbox.messages", "string_to_array", "payload::json"}

// OutboxImport is the write API's import path; a module whose code imports
// it publishes.
const OutboxImport = "github.com/pinmarket/pin/platform/outbox"

// Publishes reports whether a non-test Go file under dir imports the
// outbox's write API.
func Publishes(dir string) (bool, error) {
	found := false
	err := goFiles(dir, func(path string, f *ast.File, _ *token.FileSet) error {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == OutboxImport {
				found = true
			}
		}
		return nil
	})
	return found, err
}

// CheckModule checks the module under dir, test-support packages left out:
// every statement it hands
// Publisher.WriteWith, directly or through a function of its own that
// passes a parameter on, is a named literal (a constant, or a variable
// //go:embed fills) that passes CheckPublishes; and no non-test Go or SQL
// file names the outbox's layout. It returns every violation, joined.
func CheckModule(dir string) error {
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && testSupport(path) {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") ||
			(!strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".sql")) {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range layout {
			if strings.Contains(string(text), l) {
				errs = append(errs, fmt.Errorf("%s names the outbox's layout (%s): hand the outbox values through its write API", path, l))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	packages := map[string]*pkgFiles{}
	err = goFiles(dir, func(path string, f *ast.File, fset *token.FileSet) error {
		p := packages[filepath.Dir(path)]
		if p == nil {
			p = &pkgFiles{dir: filepath.Dir(path), fset: fset}
			packages[p.dir] = p
		}
		p.files = append(p.files, f)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range packages {
		errs = append(errs, p.checkWriteWith()...)
	}
	return errors.Join(errs...)
}

// pkgFiles are one package's non-test files.
type pkgFiles struct {
	dir   string
	fset  *token.FileSet
	files []*ast.File
}

// A statement argument: the call and which argument is the query.
type queryArg struct {
	call *ast.CallExpr
	arg  int
}

// checkWriteWith checks the query of every WriteWith call, following a
// query that is a parameter of the enclosing function to that function's
// callers in the package.
func (p *pkgFiles) checkWriteWith() []error {
	var errs []error
	var pending []queryArg
	forwarders := map[string]int{} // function name -> its query parameter
	for _, f := range p.files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || calleeName(call) != "WriteWith" || len(call.Args) < 3 {
					return true
				}
				if id, ok := call.Args[2].(*ast.Ident); ok {
					if i := paramIndex(fn, id.Name); i >= 0 {
						forwarders[fn.Name.Name] = i
						return true
					}
				}
				pending = append(pending, queryArg{call: call, arg: 2})
				return true
			})
		}
	}
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if i, ok := forwarders[calleeName(call)]; ok && i < len(call.Args) {
				pending = append(pending, queryArg{call: call, arg: i})
			}
			return true
		})
	}
	for _, q := range pending {
		pos := p.fset.Position(q.call.Pos())
		id, ok := q.call.Args[q.arg].(*ast.Ident)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: the statement handed to the outbox is not a named literal", pos))
			continue
		}
		text, err := p.literal(id.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", pos, id.Name, err))
			continue
		}
		if err := CheckPublishes(text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", pos, id.Name, err))
		}
	}
	return errs
}

// literal is the text of the package-level constant or //go:embed variable
// name.
func (p *pkgFiles) literal(name string) (string, error) {
	for _, f := range p.files {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || (gen.Tok != token.CONST && gen.Tok != token.VAR) {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != name {
						continue
					}
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							return strconv.Unquote(lit.Value)
						}
						return "", errors.New("not a string literal")
					}
					for _, doc := range []*ast.CommentGroup{vs.Doc, gen.Doc} {
						if doc == nil {
							continue
						}
						for _, c := range doc.List {
							if file, ok := strings.CutPrefix(c.Text, "//go:embed "); ok {
								b, err := os.ReadFile(filepath.Join(p.dir, strings.TrimSpace(file)))
								return string(b), err
							}
						}
					}
				}
			}
		}
	}
	return "", errors.New("no package-level constant or //go:embed variable of that name")
}

// calleeName is the called function's or method's name.
func calleeName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		return fun.Sel.Name
	}
	return ""
}

// paramIndex is the position of fn's parameter name, or -1.
func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
		if len(field.Names) == 0 {
			i++
		}
	}
	return -1
}

// testSupport reports whether dir is a test-support package (by the
// convention platform/archrules holds: its name ends in "test", as
// promotiontest), which may read the outbox's tables to check them.
func testSupport(dir string) bool { return strings.HasSuffix(filepath.Base(dir), "test") }

// goFiles parses every non-test Go file under dir.
func goFiles(dir string, visit func(path string, f *ast.File, fset *token.FileSet) error) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && testSupport(path) {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		return visit(path, f, fset)
	})
}
