package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scan is a govulncheck -format json stream: a reachable advisory without a
// fix (A), a reachable one with a fix (B) and one only in a required module (C).
const scan = `{"config": {"go_version": "go1.26.8", "db": "file:///db"}}
{"osv": {"id": "GO-A", "summary": "a"}}
{"osv": {"id": "GO-B", "summary": "b"}}
{"osv": {"id": "GO-C", "summary": "c"}}
{"finding": {"osv": "GO-A", "trace": [{"module": "example.com/a", "version": "v1.0.0"}]}}
{"finding": {"osv": "GO-A", "trace": [{"module": "example.com/a", "version": "v1.0.0", "package": "example.com/a/v4", "function": "Do", "receiver": "*T"},
  {"module": "github.com/pinmarket/pin", "package": "github.com/pinmarket/pin/cmd/pin", "function": "main", "position": {"filename": "cmd/pin/main.go", "line": 7}}]}}
{"finding": {"osv": "GO-B", "fixed_version": "v1.26.9", "trace": [{"module": "stdlib", "version": "v1.26.8", "package": "net/http", "function": "Serve"}]}}
{"finding": {"osv": "GO-C", "fixed_version": "v0.2.0", "trace": [{"module": "example.com/c", "version": "v0.1.0"}]}}
`

// now is the tests' fixed clock; fresh is the release step's gate (a stale
// database fails) on a database one day old.
var (
	now   = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	fresh = gate{now: now, dbVersion: "v0.0.0-20261202100000-0123456789ab", dbDate: now.AddDate(0, 0, -1), warnAge: 7 * 24 * time.Hour, maxAge: 30 * 24 * time.Hour, failStale: true}
)

func verdict(t *testing.T, exceptions string) (bool, string) {
	t.Helper()
	return verdictWith(t, exceptions, fresh)
}

func verdictWith(t *testing.T, exceptions string, g gate) (bool, string) {
	t.Helper()
	accepted, err := parseExceptions(strings.NewReader(exceptions), g.now)
	require.NoError(t, err)
	rep, err := readReport(strings.NewReader(scan))
	require.NoError(t, err)
	var out strings.Builder
	return judge(&out, rep, accepted, g), out.String()
}

func TestReachableVulnerabilitiesFailUnlessAcceptedWithoutAFix(t *testing.T) {
	t.Parallel()
	pass, out := verdict(t, "")
	require.False(t, pass, out)
	require.Contains(t, out, "FAIL      GO-A (example.com/a@v1.0.0, no fix): a\n            reachable: pin.main (cmd/pin/main.go:7) -> a.T.Do")
	require.Contains(t, out, "FAIL      GO-B (stdlib@v1.26.8, fixed in v1.26.9)")
	require.Contains(t, out, "info      GO-C", "a vulnerability pin does not call is reported, not failed")

	pass, out = verdict(t, "# reviewed\nGO-A 2027-01-31 pin never calls a.Do with untrusted input\n")
	require.False(t, pass, "B is still reachable: %s", out)
	require.Contains(t, out, "accepted  GO-A (example.com/a@v1.0.0, no fix) until 2027-01-31: pin never calls a.Do with untrusted input")

	pass, out = verdict(t, "GO-A 2027-01-31 reason\nGO-B 2027-01-31 reason\n")
	require.False(t, pass, out)
	require.Contains(t, out, "GO-B (stdlib@v1.26.8, fixed in v1.26.9): listed as accepted, but a fix exists now")

	pass, out = verdict(t, "GO-A 2027-01-31 reason\nGO-C 2027-01-31 reason\nGO-D 2027-01-31 reason\n")
	require.False(t, pass, out)
	require.Contains(t, out, "stale     GO-C")
	require.Contains(t, out, "stale     GO-D")
}

func TestAnExceptionNeedsAReviewByDateAReasonAndAppearsOnce(t *testing.T) {
	t.Parallel()
	for exceptions, want := range map[string]string{
		"GO-A\n":                "line 1: GO-A has no review-by date and no reason",
		"GO-A why\n":            `line 1: GO-A: "why" is not a review-by date (YYYY-MM-DD) after the ID`,
		"GO-A 2027-01-31\n":     "line 1: GO-A has no reason",
		"GO-A 31.01.2027 why\n": `"31.01.2027" is not a review-by date`,
		"GO-A 2027-06-05 why\n": "line 1: GO-A: review-by 2027-06-05 is more than six months ahead",
		"GO-A 2027-01-31 why\n\nGO-A 2027-01-31 x\n": "line 3: GO-A is listed twice",
	} {
		_, err := parseExceptions(strings.NewReader(exceptions), now)
		require.ErrorContains(t, err, want, exceptions)
	}
	_, err := parseExceptions(strings.NewReader("GO-A 2027-06-04 six months to the day\n"), now)
	require.NoError(t, err)
}

// TestAnExceptionExpiresAfterItsReviewByDay: it holds through its day
// (UTC) and fails the gate from the next, even when no longer reachable.
func TestAnExceptionExpiresAfterItsReviewByDay(t *testing.T) {
	t.Parallel()
	const exceptions = "GO-A 2026-12-03 pin never calls a.Do with untrusted input\nGO-B 2027-01-31 r\n"
	accepted, err := parseExceptions(strings.NewReader(exceptions), now)
	require.NoError(t, err)
	lastDay := time.Date(2026, 12, 3, 23, 59, 59, 0, time.UTC)
	require.False(t, accepted["GO-A"].expired(lastDay))
	require.True(t, accepted["GO-A"].expired(lastDay.Add(time.Second)))

	g := fresh
	g.now = lastDay.Add(time.Second)
	pass, out := verdictWith(t, "GO-A 2026-12-03 reason\nGO-D 2026-12-03 reason\n", g)
	require.False(t, pass, out)
	require.Contains(t, out, "FAIL      GO-A: its review-by date 2026-12-03 has passed: review the exception again")
	require.Contains(t, out, "FAIL      GO-D: its review-by date 2026-12-03 has passed", "a stale entry expires too")
}

// TestTheDatabaseAgeIsPrintedAndLimited: the date comes from VULNDB_VERSION's
// pseudo-version; past the warning age it says so, past the limit it fails
// naming the command that refreshes it.
func TestTheDatabaseAgeIsPrintedAndLimited(t *testing.T) {
	t.Parallel()
	date, err := pseudoVersionTime("v0.0.0-20261105234957-e22db6528018")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 5, 23, 49, 57, 0, time.UTC), date)
	_, err = pseudoVersionTime("v1.2.3")
	require.ErrorContains(t, err, "not a pseudo-version")
	_, err = pseudoVersionTime("")
	require.Error(t, err)

	const reviewed = "GO-A 2027-01-31 r\nGO-B 2026-12-31 r\n"
	judgeAt := func(dbDate time.Time) (bool, string) {
		g := fresh
		g.dbVersion, g.dbDate = "v0.0.0-20261105234957-e22db6528018", dbDate
		var out strings.Builder
		return judgeAge(&out, g), out.String()
	}
	pass, out := judgeAt(now.AddDate(0, 0, -1))
	require.True(t, pass, out)
	require.Equal(t, "vulnerability database: golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018 of 2026-12-02, 1 days old (limit 30)\n", out)

	pass, out = judgeAt(date) // 27 days before the fixed clock
	require.True(t, pass, out)
	require.Contains(t, out, "of 2026-11-05, 27 days old (limit 30)")
	require.Contains(t, out, "warn      the database is older than 7 days; refresh it: make vuln-refresh")

	pass, out = judgeAt(now.AddDate(0, 0, -31))
	require.False(t, pass, out)
	require.Contains(t, out, "FAIL      the database is older than 30 days: advisories published since 2026-11-02 are unknown to this scan; refresh it: make vuln-refresh")

	g := fresh
	g.dbDate = now.AddDate(0, 0, -31)
	pass, out = verdictWith(t, reviewed, g)
	require.False(t, pass, "an old database fails the whole gate: %s", out)
	require.Contains(t, out, "FAIL      the database is older than 30 days")
	require.Contains(t, out, "vuln: failed (the FAIL lines above)")
}

// TestCIWarnsLoudlyOnAStaleDatabaseButFailsOnVulnerabilities: with
// -stale-db=warn (CI) a database past the limit is a banner naming its age
// and the release step that refuses it, not a failure; a reachable
// vulnerability still fails the gate.
func TestCIWarnsLoudlyOnAStaleDatabaseButFailsOnVulnerabilities(t *testing.T) {
	t.Parallel()
	ci := fresh
	ci.failStale = false
	ci.dbDate = now.AddDate(0, 0, -46)
	var out strings.Builder
	require.True(t, judgeAge(&out, ci), out.String())
	require.Contains(t, out.String(), "WARNING   the vulnerability database is 46 DAYS OLD, past the 30-day limit: advisories published since 2026-10-18")
	require.Contains(t, out.String(), "a release refuses it (make vuln-release)")
	require.NotContains(t, out.String(), "FAIL")

	pass, report := verdictWith(t, "GO-B 2026-12-31 r\n", ci)
	require.False(t, pass, "a reachable vulnerability fails CI whatever the database's age: %s", report)
	require.Contains(t, report, "WARNING   the vulnerability database is 46 DAYS OLD")
	require.Contains(t, report, "FAIL      GO-A")

	ci.dbDate = now.AddDate(0, 0, -8)
	out.Reset()
	require.True(t, judgeAge(&out, ci))
	require.Contains(t, out.String(), "warn      the database is older than 7 days")
	require.NotContains(t, out.String(), "WARNING", "only a stale database gets the banner")
}

func TestAnEmptyScanIsNotAPass(t *testing.T) {
	t.Parallel()
	_, err := readReport(strings.NewReader(""))
	require.ErrorContains(t, err, "did the scan run?")
	_, err = readReport(strings.NewReader(`{"config": {"go_version": "go1.26.11"}} {"finding": `))
	require.Error(t, err, "a truncated stream")
}
