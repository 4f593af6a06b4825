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

// StopsOffTestGoroutine parses every _test.go file under root, and every
// other file that imports package testing (test support: testbed,
// promotiontest), and reports each place where code that runs on another
// goroutine than the test's may stop the test: a require call,
// Fatal/FailNow/Skip on a test handle, or a test handle handed to any
// function but assert's, inside a go statement's function literal, one
// handed to a Go method (errgroup, sync.WaitGroup), to time.AfterFunc or to
// a kfake cluster's Control or ControlKey, or an HTTP handler's literal
// (the server calls it on a goroutine of its own); and a go statement that
// hands a named function a test handle. Such a stop would end only that
// goroutine and leave the test running (or hang it). A helper called
// through a struct field is not seen; the rule only knows handles that are
// parameters.
func StopsOffTestGoroutine(root string) ([]string, error) {
	var found []stop
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(path, "_test.go") && !importsTesting(f) {
			return nil
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

// importsTesting reports whether f imports package testing.
func importsTesting(f *ast.File) bool {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"testing"` {
			return true
		}
	}
	return false
}

// stopsInFunc reports the stops inside the goroutines fn starts.
func stopsInFunc(fn *ast.FuncDecl) []stop {
	handles := testHandles(fn)
	var out []stop
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok {
			out = append(out, handedToGo(g, handles)...)
		}
		for _, lit := range goroutineBodies(n) {
			out = append(out, stopsIn(lit, handles)...)
		}
		return true
	})
	return out
}

// asyncCallers are the methods and functions that run the function literal
// handed to them on another goroutine: errgroup's and sync.WaitGroup's Go,
// time.AfterFunc, and a kfake cluster's Control and ControlKey.
var asyncCallers = map[string]bool{"Go": true, "AfterFunc": true, "Control": true, "ControlKey": true}

// goroutineBodies are the function literals n runs on another goroutine.
func goroutineBodies(n ast.Node) []*ast.FuncLit {
	switch n := n.(type) {
	case *ast.GoStmt:
		if lit, ok := n.Call.Fun.(*ast.FuncLit); ok {
			return []*ast.FuncLit{lit}
		}
	case *ast.CallExpr:
		if asyncCallers[funcName(n.Fun)] {
			var lits []*ast.FuncLit
			for _, arg := range n.Args {
				if lit, ok := arg.(*ast.FuncLit); ok {
					lits = append(lits, lit)
				}
			}
			return lits
		}
	case *ast.FuncLit:
		if isHTTPHandler(n) {
			return []*ast.FuncLit{n}
		}
	}
	return nil
}

// funcName is the name of the called function or method: Go of wg.Go,
// AfterFunc of time.AfterFunc.
func funcName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// isHTTPHandler reports whether lit takes an http.ResponseWriter: a handler,
// which the server calls on the connection's goroutine.
func isHTTPHandler(lit *ast.FuncLit) bool {
	for _, field := range lit.Type.Params.List {
		if typeString(field.Type) == "http.ResponseWriter" {
			return true
		}
	}
	return false
}

// handedToGo reports the test handles a go statement hands a named
// function, which then runs on the new goroutine.
func handedToGo(g *ast.GoStmt, handles map[string]bool) []stop {
	if _, ok := g.Call.Fun.(*ast.FuncLit); ok {
		return nil // its body is goroutineBodies'
	}
	var out []stop
	for _, arg := range g.Call.Args {
		if id, ok := arg.(*ast.Ident); ok && handles[id.Name] {
			out = append(out, stop{pos: g.Pos(), what: fmt.Sprintf("go %s hands the test's %s to a goroutine", callName(g.Call.Fun), id.Name)})
		}
	}
	return out
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
