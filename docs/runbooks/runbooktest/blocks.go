package runbooktest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Block is one fenced code block of a runbook.
type Block struct {
	// File and Line say where the opening fence is (Line counts from 1).
	File string
	Line int
	// Lang is the fence's info string: sh, bash, shell, console, sql, or
	// a language that is not run (json, text, …).
	Lang string
	// Heading is the nearest Markdown heading above the block.
	Heading string
	// Text is the block's content without the fence's indentation.
	Text string
	// Test is the block's annotation, nil when the line before the fence
	// is none.
	Test *Annotation
}

// Where names the block for a test failure: file, line and heading.
func (b Block) Where() string {
	return fmt.Sprintf("%s:%d (%q)", b.File, b.Line, b.Heading)
}

// Runs reports whether the block is one the harness executes: a shell or
// an SQL block.
func (b Block) Runs() bool {
	return b.IsShell() || b.IsSQL()
}

// IsShell reports whether the block is run by bash.
func (b Block) IsShell() bool {
	return slices.Contains([]string{"sh", "bash", "shell", "console"}, b.Lang)
}

// IsSQL reports whether the block is run as SQL on the database.
func (b Block) IsSQL() bool {
	return b.Lang == "sql"
}

// Script is what is executed: the text itself, or for a console block the
// lines after its `$ ` prompts.
func (b Block) Script() string {
	if b.Lang != "console" {
		return b.Text
	}
	var cmds []string
	for line := range strings.Lines(b.Text) {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "$ "); ok {
			cmds = append(cmds, cmd)
		}
	}
	return strings.Join(cmds, "\n")
}

// Annotation is the `<!-- runbook-test: … -->` line right before a block:
// the state the database is put into, and what the block must produce.
type Annotation struct {
	// State names the fixture that prepares the database (and, for some,
	// a running instance and a broker) before the block runs.
	State string
	// Expect is ExpectRows or ExpectOK.
	Expect string
	// Match, when set, is a regular expression the block's output must
	// match (placeholders are replaced in it too).
	Match string
	// Needs lists the external clients the block calls (kcat), found with
	// testbed.Tool: skipped where missing, failed in CI.
	Needs []string
	// Skip, when set, says why the block cannot run here; the block is not
	// run, and the test lists it with that reason.
	Skip string
}

// What an annotation's expect= may say.
const (
	// ExpectRows: the block must produce something. A shell block prints at
	// least one line on stdout; in an SQL block every statement that returns
	// rows returns at least one row with a value that is not NULL, 0 or
	// empty, and every INSERT, UPDATE and DELETE changes at least one row.
	ExpectRows = "rows"
	// ExpectOK: the block only has to succeed (exit 0, no SQL error).
	ExpectOK = "ok"
)

// annotationLine is the comment that ties a block to a fixture.
var annotationLine = regexp.MustCompile(`^<!--\s*runbook-test:(.*?)-->$`)

// annotationAttr is one key=value or key="value with spaces" of it.
var annotationAttr = regexp.MustCompile(`^\s*([a-z]+)=("(?:[^"\\]|\\.)*"|\S+)`)

// ParseAnnotation reads the attributes of an annotation comment's body.
func ParseAnnotation(body string) (*Annotation, error) {
	a := &Annotation{}
	rest := body
	for strings.TrimSpace(rest) != "" {
		m := annotationAttr.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("runbook-test: cannot read %q (want key=value or key=\"value\")", strings.TrimSpace(rest))
		}
		rest = rest[len(m[0]):]
		key, value := m[1], m[2]
		if strings.HasPrefix(value, `"`) {
			value = strings.ReplaceAll(strings.ReplaceAll(value[1:len(value)-1], `\"`, `"`), `\\`, `\`)
		}
		switch key {
		case "state":
			a.State = value
		case "expect":
			a.Expect = value
		case "match":
			if _, err := regexp.Compile(value); err != nil {
				return nil, fmt.Errorf("runbook-test: match=%q: %w", value, err)
			}
			a.Match = value
		case "needs":
			a.Needs = strings.Split(value, ",")
		case "skip":
			a.Skip = value
		default:
			return nil, fmt.Errorf("runbook-test: unknown attribute %q (want state, expect, match, needs or skip)", key)
		}
	}
	switch {
	case a.Skip != "":
		return a, nil
	case a.State == "":
		return nil, fmt.Errorf("runbook-test: no state= (or skip=\"reason\" for a block that cannot run here)")
	case a.Expect != ExpectRows && a.Expect != ExpectOK:
		return nil, fmt.Errorf("runbook-test: expect=%q, want %s or %s", a.Expect, ExpectRows, ExpectOK)
	}
	return a, nil
}

// fence opens or closes a fenced block: its indentation, the backticks or
// tildes, and the info string.
var fence = regexp.MustCompile("^( *)(`{3,}|~{3,})\\s*([^`\\s]*)")

// ParseBlocks returns every fenced block of doc, the Markdown text of file,
// with its annotation. Problems that make a block unusable (an annotation
// that cannot be read or that precedes no block, a fence without a
// language, an unclosed fence) are returned as errors, one per problem.
func ParseBlocks(file, doc string) ([]Block, []error) {
	var (
		blocks  []Block
		errs    []error
		heading string
		lastArg string // the last non-blank line outside blocks
		lastNo  int
	)
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		m := fence.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "#") {
				heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
			if trimmed != "" {
				if annotationLine.MatchString(lastArg) {
					errs = append(errs, fmt.Errorf("%s:%d: a runbook-test comment must be the line right before a fenced block", file, lastNo))
				}
				lastArg, lastNo = trimmed, i+1
			}
			continue
		}
		indent, marks := len(m[1]), m[2]
		b := Block{File: file, Line: i + 1, Lang: m[3], Heading: heading}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			if c := fence.FindStringSubmatch(l); c != nil && c[3] == "" && strings.HasPrefix(c[2], marks[:1]) && len(c[2]) >= len(marks) {
				closed = true
				break
			}
			body = append(body, trimIndent(l, indent))
		}
		if !closed {
			errs = append(errs, fmt.Errorf("%s:%d: the fenced block is never closed", file, b.Line))
			break
		}
		b.Text = strings.Join(body, "\n") + "\n"
		if am := annotationLine.FindStringSubmatch(lastArg); am != nil {
			a, err := ParseAnnotation(am[1])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", file, lastNo, err))
			}
			b.Test = a
		}
		if b.Lang == "" {
			errs = append(errs, fmt.Errorf("%s:%d: a fenced block without a language: write ```sh, ```sql (both are run) or ```text", file, b.Line))
		}
		blocks = append(blocks, b)
		lastArg, lastNo = "", 0
	}
	if annotationLine.MatchString(lastArg) {
		errs = append(errs, fmt.Errorf("%s:%d: a runbook-test comment must be the line right before a fenced block", file, lastNo))
	}
	return blocks, errs
}

// trimIndent removes up to n leading spaces, the fence's indentation inside
// a list item.
func trimIndent(line string, n int) string {
	for i := 0; i < n && strings.HasPrefix(line, " "); i++ {
		line = line[1:]
	}
	return line
}

// placeholder is a value the operator fills in: <purchase_id>, <id>.
var placeholder = regexp.MustCompile(`<([a-z][a-z0-9_]*)>`)

// Fill replaces every <name> of text with values[name]. It returns the
// names it found no value for.
func Fill(text string, values map[string]string) (string, []string) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(text, func(p string) string {
		name := p[1 : len(p)-1]
		v, ok := values[name]
		if !ok {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return p
		}
		return v
	})
	return out, missing
}
