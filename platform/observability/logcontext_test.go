package observability_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogCallsPassTheContextTheyHave: the trace_id, span_id, request_id and
// run_id of a log line come from the context given to the *Context calls
// (NewLogger), so a function that has a context must log with it. Checked on
// every non-test Go file of the repository.
func TestLogCallsPassTheContextTheyHave(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		calls, err := contextlessLogCalls(path, nil)
		found = append(found, calls...)
		return err
	})
	require.NoError(t, err)
	require.Empty(t, found, "log with the *Context call (InfoContext(ctx, ...)) where a context is at hand")
}

// TestLogContextCheckCatchesAPlantedCall shows the check failing.
func TestLogContextCheckCatchesAPlantedCall(t *testing.T) {
	t.Parallel()
	src := `package p
func handle(ctx context.Context, logger *slog.Logger) {
	logger.InfoContext(ctx, "fine")
	go func() { logger.Warn("no trace id") }()
}
func (s *server) serve(c echo.Context) error { s.logger.Error("no request id"); return nil }
func stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	slog.Info("stopping")
	_ = ctx
}
func noContext(logger *slog.Logger) { logger.Info("nothing to pass") }
`
	calls, err := contextlessLogCalls("planted.go", src)
	require.NoError(t, err)
	require.Len(t, calls, 3, "%v", calls)
	require.Contains(t, calls[0], "logger.Warn")
	require.Contains(t, calls[1], "s.logger.Error")
	require.Contains(t, calls[2], "slog.Info")
}

// logReceiver recognises what a log call is made on, by name: the checked
// code calls loggers logger, l.logger, h.logger, d.Logger or slog.
var logReceiver = regexp.MustCompile(`(?i)(^|\.)(slog|log|logger)$`)

// contextlessLogCalls lists the calls to Debug, Info, Warn or Error on a
// logger inside a function that has a context: a context.Context or
// echo.Context parameter, or a ctx variable it declares.
func contextlessLogCalls(path string, src any) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		var typ *ast.FuncType
		var body *ast.BlockStmt
		switch f := n.(type) {
		case *ast.FuncDecl:
			typ, body = f.Type, f.Body
		case *ast.FuncLit:
			typ, body = f.Type, f.Body
		default:
			return true
		}
		if body == nil || !hasContext(typ, body) {
			return true
		}
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Debug", "Info", "Warn", "Error":
			default:
				return true
			}
			if recv := exprString(sel.X); logReceiver.MatchString(recv) && len(call.Args) > 0 {
				out = append(out, fset.Position(call.Pos()).String()+": "+recv+"."+sel.Sel.Name)
			}
			return true
		})
		return false // the nested functions were searched with this one
	})
	return out, nil
}

func hasContext(typ *ast.FuncType, body *ast.BlockStmt) bool {
	for _, p := range typ.Params.List {
		if s := exprString(p.Type); s == "context.Context" || s == "echo.Context" {
			return true
		}
	}
	declares := false
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && id.Name == "ctx" {
					declares = true
				}
			}
		}
		return !declares
	})
	return declares
}

// exprString renders identifiers and selectors (a.b.c); anything else is "".
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x := exprString(e.X); x != "" {
			return x + "." + e.Sel.Name
		}
	}
	return ""
}
