// Command vulngate reads govulncheck's JSON output (-format json) on stdin
// and fails when a vulnerability is reachable from pin's code, unless the
// reviewed exceptions file accepts it. It is the second half of `make vuln`
// (docs/adr/0011-toolchain-and-vulnerability-gate.md).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	exceptions := flag.String("exceptions", "docs/vuln-exceptions.txt", "the reviewed file of accepted advisories")
	flag.Parse()
	f, err := os.Open(*exceptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulngate:", err)
		os.Exit(2)
	}
	accepted, err := parseExceptions(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vulngate: %s: %v\n", *exceptions, err)
		os.Exit(2)
	}
	report, err := readReport(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulngate:", err)
		os.Exit(2)
	}
	if !judge(os.Stdout, report, accepted) {
		os.Exit(1)
	}
}

// parseExceptions reads "ID reason" lines; # starts a comment. An entry
// without a reason is refused: the file is a review record, not a mute list.
func parseExceptions(r io.Reader) (map[string]string, error) {
	accepted := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if reason = strings.TrimSpace(reason); reason == "" {
			return nil, fmt.Errorf("line %d: %s has no reason", n, id)
		}
		if _, dup := accepted[id]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", n, id)
		}
		accepted[id] = reason
	}
	return accepted, sc.Err()
}

// message is one object of govulncheck's JSON stream; only the fields the
// gate reads (golang.org/x/vuln/internal/govulncheck).
type message struct {
	Config *struct {
		GoVersion string `json:"go_version"`
		DB        string `json:"db"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *finding `json:"finding"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

// frame is one step of a finding's trace, from the vulnerable symbol to
// pin's code.
type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

func (f frame) symbol() string {
	// The package's last element, skipping a major-version suffix (echo/v4).
	parts := strings.Split(f.Package, "/")
	name := parts[len(parts)-1]
	if len(parts) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = parts[len(parts)-2]
	}
	if f.Receiver != "" {
		return name + "." + strings.TrimPrefix(f.Receiver, "*") + "." + f.Function
	}
	return name + "." + f.Function
}

// vuln is one advisory the scan found, at its deepest level.
type vuln struct {
	id, summary, module, version, fixed string
	// reachable is a call path from pin's code to a vulnerable symbol:
	// only these fail the gate; imported or required but uncalled code is
	// reported and let through, as govulncheck itself does.
	reachable []frame
}

type report struct {
	goVersion, db string
	vulns         map[string]*vuln
}

func readReport(r io.Reader) (report, error) {
	rep := report{vulns: map[string]*vuln{}}
	summaries := map[string]string{}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return report{}, fmt.Errorf("reading govulncheck -format json: %w", err)
		}
		switch {
		case m.Config != nil:
			rep.goVersion, rep.db = m.Config.GoVersion, m.Config.DB
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			v := rep.vulns[f.OSV]
			if v == nil {
				v = &vuln{id: f.OSV, module: f.Trace[0].Module, version: f.Trace[0].Version}
				rep.vulns[f.OSV] = v
			}
			v.fixed = f.FixedVersion
			if f.Trace[0].Function != "" && v.reachable == nil {
				v.reachable = f.Trace
			}
		}
	}
	// An empty or truncated stream must not read as a clean scan.
	if rep.goVersion == "" {
		return report{}, errors.New("no govulncheck config message on stdin: did the scan run?")
	}
	for id, v := range rep.vulns {
		v.summary = summaries[id]
	}
	return rep, nil
}

// judge prints the verdict and reports whether the gate passes. An exception
// holds only while the advisory has no fix: once one exists, upgrading is the
// answer and the entry must go.
func judge(w io.Writer, rep report, accepted map[string]string) bool {
	fmt.Fprintf(w, "govulncheck: %s, database %s\n", rep.goVersion, rep.db)
	pass := true
	for _, id := range slices.Sorted(maps.Keys(rep.vulns)) {
		v := rep.vulns[id]
		fixed := "no fix"
		if v.fixed != "" {
			fixed = "fixed in " + v.fixed
		}
		where := fmt.Sprintf("%s@%s, %s", v.module, v.version, fixed)
		reason, ok := accepted[id]
		switch {
		case v.reachable == nil:
			fmt.Fprintf(w, "  info      %s (%s): in a module or package pin uses, not called: %s\n", id, where, v.summary)
		case ok && v.fixed == "":
			fmt.Fprintf(w, "  accepted  %s (%s): %s\n", id, where, reason)
		case ok:
			pass = false
			fmt.Fprintf(w, "  FAIL      %s (%s): listed as accepted, but a fix exists now: upgrade and remove the entry\n", id, where)
		default:
			pass = false
			fmt.Fprintf(w, "  FAIL      %s (%s): %s\n            reachable: %s\n", id, where, v.summary, path(v.reachable))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(accepted)) {
		if v := rep.vulns[id]; v == nil || v.reachable == nil {
			fmt.Fprintf(w, "  stale     %s is accepted but no longer reachable: remove it from the exceptions\n", id)
		}
	}
	if pass {
		fmt.Fprintln(w, "vuln: no reachable vulnerability outside the reviewed exceptions")
	} else {
		fmt.Fprintln(w, "vuln: reachable vulnerabilities (above); fix them or review an exception")
	}
	return pass
}

// path names where pin's code enters a trace and the vulnerable symbol it
// reaches.
func path(trace []frame) string {
	entry := trace[len(trace)-1]
	at := ""
	if entry.Position != nil {
		at = fmt.Sprintf(" (%s:%d)", entry.Position.Filename, entry.Position.Line)
	}
	return entry.symbol() + at + " -> " + trace[0].symbol()
}
