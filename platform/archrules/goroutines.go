package archrules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// stopMethods end a test through runtime.Goexit, which only works on the
// test's own goroutine (testing.T.FailNow's documentation).
var stopMethods = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// testingTypes are the parameter types that make an identifier the test's handle.
var testingTypes = map[string]bool{"*testing.T": true, "*testing.B": true, "*testing.F": true, "testing.TB": true}

// StopsOffTestGoroutine parses every _test.go file under root and reports
// each place where a goroutine's function literal (go func, or one passed
// to a Go method: errgroup, sync.WaitGroup) may stop the test: a require
// call, Fatal/FailNow/Skip on a test handle, or a test handle handed to any
// function but assert's. Such a stop would end only the goroutine and leave
// the test running (or hang it). A helper called through a struct field is
// not seen; the rule only knows handles that are parameters.
func StopsOffTestGoroutine(root string) ([]string, error) {
	var found []stop
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				for _, s := range stopsInFunc(fn) {
					s.file, s.line = filepath.ToSlash(rel), fset.Position(s.pos).Line
					found = append(found, s)
				}
			}
		}
		return nil
	})
	sort.Slice(found, func(i, j int) bool {
		if found[i].file != found[j].file {
			return found[i].file < found[j].file
		}
		return found[i].line < found[j].line
	})
	out := make([]string, len(found))
	for i, s := range found {
		out[i] = fmt.Sprintf("%s:%d: %s", s.file, s.line, s.what)
	}
	return out, err
}

// stop is one call that may stop the test off its goroutine.
type stop struct {
	pos  token.Pos
	file string
	line int
	what string
}

// stopsInFunc reports the stops inside the goroutines fn starts.
func stopsInFunc(fn *ast.FuncDecl) []stop {
	handles := testHandles(fn)
	var out []stop
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		for _, lit := range goroutineBodies(n) {
			out = append(out, stopsIn(lit, handles)...)
		}
		return true
	})
	return out
}

// goroutineBodies are the function literals n runs on a new goroutine.
func goroutineBodies(n ast.Node) []*ast.FuncLit {
	switch n := n.(type) {
	case *ast.GoStmt:
		if lit, ok := n.Call.Fun.(*ast.FuncLit); ok {
			return []*ast.FuncLit{lit}
		}
	case *ast.CallExpr:
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
			var lits []*ast.FuncLit
			for _, arg := range n.Args {
				if lit, ok := arg.(*ast.FuncLit); ok {
					lits = append(lits, lit)
				}
			}
			return lits
		}
	}
	return nil
}

// stopsIn finds the calls in lit that may stop the test.
func stopsIn(lit *ast.FuncLit, handles map[string]bool) []stop {
	var out []stop
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := callName(call.Fun)
		switch {
		case strings.HasPrefix(name, "require."):
			out = append(out, stop{pos: call.Pos(), what: name + " on a goroutine"})
			return true
		case strings.HasPrefix(name, "assert."):
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && stopMethods[sel.Sel.Name] && handles[callName(sel.X)] {
			out = append(out, stop{pos: call.Pos(), what: name + " on a goroutine"})
			return true
		}
		for _, arg := range call.Args {
			if id, ok := arg.(*ast.Ident); ok && handles[id.Name] {
				out = append(out, stop{pos: call.Pos(), what: fmt.Sprintf("%s hands the test's %s to a goroutine's call", name, id.Name)})
			}
		}
		return true
	})
	return out
}

// testHandles are the names of fn's parameters, and its literals', that
// hold a *testing.T, *testing.B, *testing.F or testing.TB.
func testHandles(fn *ast.FuncDecl) map[string]bool {
	handles := map[string]bool{}
	add := func(params *ast.FieldList) {
		for _, field := range params.List {
			if testingTypes[typeString(field.Type)] {
				for _, name := range field.Names {
					handles[name.Name] = true
				}
			}
		}
	}
	add(fn.Type.Params)
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok {
			add(lit.Type.Params)
		}
		return true
	})
	return handles
}

// typeString writes a parameter type as its source says it: *testing.T.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// callName is the called expression as the source says it: require.NoError,
// b.publish, t.Fatal; "" for anything more complex.
func callName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if x := callName(e.X); x != "" {
			return x + "." + e.Sel.Name
		}
	case *ast.Ident:
		return e.Name
	}
	return ""
}
