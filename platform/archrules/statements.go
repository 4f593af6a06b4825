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

// statementMethods run the statement they are given: database/sql's and
// pgx's Exec, Query and QueryRow (with or without Context), Prepare, and
// GORM's Exec and Raw.
var statementMethods = map[string]bool{
	"Exec": true, "ExecContext": true, "Query": true, "QueryContext": true, "QueryRow": true,
	"QueryRowContext": true, "Prepare": true, "PrepareContext": true, "Raw": true,
}

// FragmentedStatements parses the Go files under root/dir that ship (not
// _test.go files, testdata or a test-support package: those build
// throw-away databases and explain statements) and reports each call that
// runs a statement (statementMethods) with a statement that is not whole:
// anything but a string literal, a constant declared as one string literal,
// or a string parameter of the enclosing function, which hands on its
// caller's statement. So a statement joined with + or fmt.Sprintf, a
// constant built from other constants, or a `where` text passed in is
// reported. allowed names functions, as "path:Func" relative to root, that
// may build their statement, each with the reason it must (an identifier
// no parameter can carry); a reason is required. Calls through a helper of
// another name are not seen.
func FragmentedStatements(root, dir string, allowed map[string]string) ([]string, error) {
	for fn, why := range allowed {
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("archrules: %s is allowed to build its statement without a reason", fn)
		}
	}
	var found []string
	packages := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || isTestSupport(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		packages[filepath.Dir(path)] = append(packages[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, files := range packages {
		consts := wholeConstants(files)
		for _, f := range files {
			path := fset.Position(f.Pos()).Filename
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return nil, err
			}
			rel = filepath.ToSlash(rel)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if _, ok := allowed[rel+":"+fn.Name.Name]; ok {
					continue
				}
				for _, p := range fragmentsIn(fn, consts) {
					found = append(found, fmt.Sprintf("%s:%d: %s", rel, fset.Position(p.pos).Line, p.what))
				}
			}
		}
	}
	sort.Strings(found)
	return found, nil
}

// wholeConstants maps each constant of a package's files to whether it is
// declared as one string literal.
func wholeConstants(files []*ast.File) map[string]bool {
	consts := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			gen, ok := n.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				return true
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					whole := false
					if i < len(vs.Values) {
						lit, ok := vs.Values[i].(*ast.BasicLit)
						whole = ok && lit.Kind == token.STRING
					}
					consts[name.Name] = whole
				}
			}
			return true
		})
	}
	return consts
}

type fragment struct {
	pos  token.Pos
	what string
}

// fragmentsIn finds the calls of fn that run a statement that is not whole.
func fragmentsIn(fn *ast.FuncDecl, consts map[string]bool) []fragment {
	params := stringParams(fn.Type)
	var out []fragment
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok {
			for name := range stringParams(lit.Type) {
				params[name] = true
			}
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !statementMethods[sel.Sel.Name] || len(call.Args) == 0 {
			return true
		}
		i := 0 // database/sql's Exec, GORM's Exec and Raw
		if strings.HasSuffix(sel.Sel.Name, "Context") || isContext(call.Args[0]) {
			i = 1 // pgx's Exec, and every method that says it takes a context
		}
		if i >= len(call.Args) {
			return true
		}
		if _, ok := call.Args[i].(*ast.FuncLit); ok {
			return true // database/sql's Conn.Raw: a function, no statement
		}
		if why := notWhole(call.Args[i], consts, params); why != "" {
			out = append(out, fragment{call.Pos(), fmt.Sprintf("%s runs %s", sel.Sel.Name, why)})
		}
		return true
	})
	return out
}

// notWhole says why the statement e is not whole, "" when it is.
func notWhole(e ast.Expr, consts map[string]bool, params map[string]bool) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			return ""
		}
	case *ast.ParenExpr:
		return notWhole(x.X, consts, params)
	case *ast.Ident:
		whole, isConst := consts[x.Name]
		switch {
		case isConst && whole:
			return ""
		case isConst:
			return "the constant " + x.Name + ", which is assembled"
		case params[x.Name]:
			return "" // its caller's statement, checked where it is written
		}
		return x.Name + ", which is not a constant"
	case *ast.BinaryExpr:
		return "a statement joined with " + x.Op.String()
	case *ast.CallExpr:
		return "a statement built by a call"
	}
	return "a statement that is not one literal"
}

// stringParams are the names of ft's parameters of type string.
func stringParams(ft *ast.FuncType) map[string]bool {
	out := map[string]bool{}
	if ft.Params == nil {
		return out
	}
	for _, field := range ft.Params.List {
		if id, ok := field.Type.(*ast.Ident); ok && id.Name == "string" {
			for _, name := range field.Names {
				out[name.Name] = true
			}
		}
	}
	return out
}

// isContext reports whether e looks like the context a call without
// Context in its name takes first (pgx's): a variable named ctx, or a call
// of package context or of a Context method.
func isContext(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "ctx" || strings.HasSuffix(x.Name, "Ctx")
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" {
			return true
		}
		return sel.Sel.Name == "Context"
	}
	return false
}
