// Command vulngate reads govulncheck's JSON output (-format json) on stdin
// and fails when a vulnerability is reachable from pin's code, unless the
// reviewed exceptions file accepts it, or when an exception's review-by date
// has passed. A database older than -max-age-days fails only with
// -stale-db=fail (the release step); CI's -stale-db=warn says it loudly and
// lets it pass, since a mirror's lag is not a vulnerability. It is the second
// half of `make vuln` (docs/adr/0011-toolchain-and-vulnerability-gate.md).
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
	"regexp"
	"slices"
	"strings"
	"time"
)

// refreshCommand is what moves the database to the newest snapshot.
const refreshCommand = "make vuln-refresh"

// maxReviewHorizon bounds how far ahead a review-by date may be: an
// exception is looked at again at least twice a year.
const maxReviewHorizon = 183 * 24 * time.Hour

// gate is what the verdict depends on besides the scan and the exceptions.
type gate struct {
	now time.Time
	// dbVersion is golang.org/x/vulndb's version the database was built
	// from; dbDate its commit time.
	dbVersion string
	dbDate    time.Time
	// warnAge and maxAge: a database older than warnAge is flagged; one
	// older than maxAge is stale, which fails the gate when failStale is set
	// (the release step) and is a loud warning otherwise (CI).
	warnAge, maxAge time.Duration
	failStale       bool
}

func main() {
	exceptions := flag.String("exceptions", "docs/vuln-exceptions.txt", "the reviewed file of accepted advisories")
	dbVersion := flag.String("db-version", "", "golang.org/x/vulndb's version the database was built from (VULNDB_VERSION)")
	warnDays := flag.Int("warn-age-days", 7, "flag a database older than this many days")
	maxDays := flag.Int("max-age-days", 45, "a database older than this many days is stale")
	staleDB := flag.String("stale-db", "fail", "what a stale database does: fail (the release step) or warn (CI)")
	flag.Parse()
	if *staleDB != "fail" && *staleDB != "warn" {
		fmt.Fprintf(os.Stderr, "vulngate: -stale-db must be fail or warn, not %q\n", *staleDB)
		os.Exit(2)
	}
	g := gate{now: time.Now(), dbVersion: *dbVersion, warnAge: days(*warnDays), maxAge: days(*maxDays), failStale: *staleDB == "fail"}
	var err error
	if g.dbDate, err = pseudoVersionTime(*dbVersion); err != nil {
		fmt.Fprintln(os.Stderr, "vulngate: -db-version:", err)
		os.Exit(2)
	}
	f, err := os.Open(*exceptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulngate:", err)
		os.Exit(2)
	}
	accepted, err := parseExceptions(f, g.now)
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
	if !judge(os.Stdout, report, accepted, g) {
		os.Exit(1)
	}
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// pseudoVersion is a module pseudo-version's tail: its UTC commit time and
// commit hash (golang.org/x/vulndb has no tags, only pseudo-versions).
var pseudoVersion = regexp.MustCompile(`[-.](\d{14})-[0-9a-f]{12}$`)

// pseudoVersionTime is the commit time a pseudo-version carries.
func pseudoVersionTime(v string) (time.Time, error) {
	m := pseudoVersion.FindStringSubmatch(v)
	if m == nil {
		return time.Time{}, fmt.Errorf("%q is not a pseudo-version (vYYYYMMDDhhmmss-commit): the database's date is unknown", v)
	}
	return time.Parse("20060102150405", m[1])
}

// exception is one reviewed entry of the exceptions file.
type exception struct {
	reason   string
	reviewBy time.Time // the last day the entry holds
}

// parseExceptions reads "ID REVIEW-BY reason" lines (REVIEW-BY is
// YYYY-MM-DD); # starts a comment. An entry without a reason is refused: the
// file is a review record, not a mute list; and one without a date, or with
// one more than maxReviewHorizon after now, since it would never be looked
// at again.
func parseExceptions(r io.Reader, now time.Time) (map[string]exception, error) {
	accepted := map[string]exception{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, " ", 3)
		id := fields[0]
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: %s has no review-by date and no reason", n, id)
		}
		reviewBy, err := time.Parse(time.DateOnly, fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %q is not a review-by date (YYYY-MM-DD) after the ID", n, id, fields[1])
		}
		if reviewBy.Sub(now) > maxReviewHorizon {
			return nil, fmt.Errorf("line %d: %s: review-by %s is more than six months ahead", n, id, fields[1])
		}
		if len(fields) < 3 || strings.TrimSpace(fields[2]) == "" {
			return nil, fmt.Errorf("line %d: %s has no reason", n, id)
		}
		if _, dup := accepted[id]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", n, id)
		}
		accepted[id] = exception{reason: strings.TrimSpace(fields[2]), reviewBy: reviewBy}
	}
	return accepted, sc.Err()
}

// expired reports whether the entry's review-by day has ended at now (UTC).
func (e exception) expired(now time.Time) bool {
	return !now.Before(e.reviewBy.AddDate(0, 0, 1))
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
// holds only while the advisory has no fix and its review-by date has not
// passed; the database must be younger than the gate's maxAge.
func judge(w io.Writer, rep report, accepted map[string]exception, g gate) bool {
	fmt.Fprintf(w, "govulncheck: %s, database %s\n", rep.goVersion, rep.db)
	pass := judgeAge(w, g)
	for _, id := range slices.Sorted(maps.Keys(rep.vulns)) {
		v := rep.vulns[id]
		fixed := "no fix"
		if v.fixed != "" {
			fixed = "fixed in " + v.fixed
		}
		where := fmt.Sprintf("%s@%s, %s", v.module, v.version, fixed)
		exc, ok := accepted[id]
		switch {
		case v.reachable == nil:
			fmt.Fprintf(w, "  info      %s (%s): in a module or package pin uses, not called: %s\n", id, where, v.summary)
		case ok && v.fixed == "":
			fmt.Fprintf(w, "  accepted  %s (%s) until %s: %s\n", id, where, exc.reviewBy.Format(time.DateOnly), exc.reason)
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
		if exc := accepted[id]; exc.expired(g.now) {
			pass = false
			fmt.Fprintf(w, "  FAIL      %s: its review-by date %s has passed: review the exception again (a new date and reason) or remove it\n",
				id, exc.reviewBy.Format(time.DateOnly))
		}
	}
	if pass {
		fmt.Fprintln(w, "vuln: no reachable vulnerability outside the reviewed exceptions")
	} else {
		fmt.Fprintln(w, "vuln: failed (the FAIL lines above): fix the vulnerability, review the exception or refresh the database")
	}
	return pass
}

// judgeAge prints the database's date and age and reports whether it is
// young enough, or old but only to be warned about (CI: failStale unset).
func judgeAge(w io.Writer, g gate) bool {
	age := g.now.Sub(g.dbDate)
	ageDays := int(age / (24 * time.Hour))
	maxDays := int(g.maxAge / (24 * time.Hour))
	fmt.Fprintf(w, "vulnerability database: golang.org/x/vulndb@%s of %s, %d days old (limit %d)\n",
		g.dbVersion, g.dbDate.Format(time.DateOnly), ageDays, maxDays)
	switch {
	case age > g.maxAge && g.failStale:
		fmt.Fprintf(w, "  FAIL      the database is older than %d days: advisories published since %s are unknown to this scan; refresh it: %s\n",
			maxDays, g.dbDate.Format(time.DateOnly), refreshCommand)
		return false
	case age > g.maxAge:
		banner := strings.Repeat("!", 100)
		fmt.Fprintf(w, "%s\n  WARNING   the vulnerability database is %d DAYS OLD, past the %d-day limit: advisories published since %s\n"+
			"            are unknown to this scan. CI lets it pass (a mirror's lag is not a vulnerability);\n"+
			"            a release refuses it (make vuln-release). Refresh it: %s\n%s\n",
			banner, ageDays, maxDays, g.dbDate.Format(time.DateOnly), refreshCommand, banner)
	case age > g.warnAge:
		fmt.Fprintf(w, "  warn      the database is older than %d days; refresh it: %s\n", int(g.warnAge/(24*time.Hour)), refreshCommand)
	}
	return true
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
