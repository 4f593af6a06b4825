package runbooktest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Where a runbook quotes a log message (docs/runbooks/README.md): in
// backticks after "log", "logs", "line" or "lines"; in backticks before
// "line(s)" or "log line(s)"; as "msg":"…"; and every backticked text of a
// table row whose first cell speaks of logs.
var (
	afterLogWord  = regexp.MustCompile("(?i)\\b(?:log|logs|line|lines)\\s+`([^`]+)`")
	beforeLine    = regexp.MustCompile("`([^`]+)`\\s+(?:log\\s+)?lines?\\b")
	msgField      = regexp.MustCompile(`"msg":\s*"([^"]+)"`)
	backticked    = regexp.MustCompile("`([^`]+)`")
	logTableFirst = regexp.MustCompile(`(?i)^\|\s*[^|]*\blogs?\b[^|]*\|`)
)

// QuotedLogMessages returns the log messages doc quotes, each once, in the
// order they first appear.
func QuotedLogMessages(doc string) []string {
	var found []string
	add := func(msg string) {
		msg = strings.TrimSpace(msg)
		if msg != "" && !slices.Contains(found, msg) {
			found = append(found, msg)
		}
	}
	for line := range strings.Lines(doc) {
		for _, re := range []*regexp.Regexp{afterLogWord, beforeLine, msgField} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
		}
		if first := logTableFirst.FindString(line); first != "" {
			for _, m := range backticked.FindAllStringSubmatch(line[len(first):], -1) {
				add(m[1])
			}
		}
	}
	return found
}

// slogMessageArg is the index of the message among the arguments of the
// log/slog methods (and of loggers that mirror them).
var slogMessageArg = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2,
}

// LoggedMessages returns the messages the Go code under root can log: the
// string literals (or string constants) passed as the message of a call
// to a slog-style method (Info, WarnContext, Log, …) in a non-test file.
// Directories starting with "." and testdata are left out.
func LoggedMessages(root string) (map[string]bool, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
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
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if spec, ok := n.(*ast.ValueSpec); ok {
				for i, name := range spec.Names {
					if i < len(spec.Values) {
						if s, ok := stringLit(spec.Values[i]); ok {
							consts[name.Name] = s
						}
					}
				}
			}
			return true
		})
	}
	msgs := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := slogMessageArg[sel.Sel.Name]
			if !ok || i >= len(call.Args) {
				return true
			}
			if s, ok := stringLit(call.Args[i]); ok {
				msgs[s] = true
			} else if id, ok := call.Args[i].(*ast.Ident); ok && consts[id.Name] != "" {
				msgs[consts[id.Name]] = true
			}
			return true
		})
	}
	return msgs, nil
}

// stringLit is the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
