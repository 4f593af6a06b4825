package main

import (
	"strings"
	"testing"

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

func verdict(t *testing.T, exceptions string) (bool, string) {
	t.Helper()
	accepted, err := parseExceptions(strings.NewReader(exceptions))
	require.NoError(t, err)
	rep, err := readReport(strings.NewReader(scan))
	require.NoError(t, err)
	var out strings.Builder
	return judge(&out, rep, accepted), out.String()
}

func TestReachableVulnerabilitiesFailUnlessAcceptedWithoutAFix(t *testing.T) {
	t.Parallel()
	pass, out := verdict(t, "")
	require.False(t, pass, out)
	require.Contains(t, out, "FAIL      GO-A (example.com/a@v1.0.0, no fix): a\n            reachable: pin.main (cmd/pin/main.go:7) -> a.T.Do")
	require.Contains(t, out, "FAIL      GO-B (stdlib@v1.26.8, fixed in v1.26.9)")
	require.Contains(t, out, "info      GO-C", "a vulnerability pin does not call is reported, not failed")

	pass, out = verdict(t, "# reviewed\nGO-A pin never calls a.Do with untrusted input\n")
	require.False(t, pass, "B is still reachable: %s", out)
	require.Contains(t, out, "accepted  GO-A (example.com/a@v1.0.0, no fix): pin never calls a.Do with untrusted input")

	pass, out = verdict(t, "GO-A reason\nGO-B reason\n")
	require.False(t, pass, out)
	require.Contains(t, out, "GO-B (stdlib@v1.26.8, fixed in v1.26.9): listed as accepted, but a fix exists now")

	pass, out = verdict(t, "GO-A reason\nGO-C reason\nGO-D reason\n")
	require.False(t, pass, out)
	require.Contains(t, out, "stale     GO-C")
	require.Contains(t, out, "stale     GO-D")
}

func TestAnExceptionNeedsAReasonAndAppearsOnce(t *testing.T) {
	t.Parallel()
	_, err := parseExceptions(strings.NewReader("GO-A\n"))
	require.ErrorContains(t, err, "line 1: GO-A has no reason")
	_, err = parseExceptions(strings.NewReader("GO-A why\n\nGO-A why again\n"))
	require.ErrorContains(t, err, "line 3: GO-A is listed twice")
}

func TestAnEmptyScanIsNotAPass(t *testing.T) {
	t.Parallel()
	_, err := readReport(strings.NewReader(""))
	require.ErrorContains(t, err, "did the scan run?")
	_, err = readReport(strings.NewReader(`{"config": {"go_version": "go1.26.11"}} {"finding": `))
	require.Error(t, err, "a truncated stream")
}
