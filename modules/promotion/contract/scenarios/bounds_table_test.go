package scenarios

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostileRecordsCoverTheBoundsTable holds the contract page's bounds
// table and hostile-records together: every field a row bounds is named by
// a hostile record's refusal, or is below with the reason it is not.
func TestHostileRecordsCoverTheBoundsTable(t *testing.T) {
	notOwnRecord := map[string]string{
		"messageId":   "a record's key and message_id header must agree with its value, and that is refused first (a key that is another purchase, no message_id header)",
		"aggregateId": "as messageId",
		"purchaseId":  "as messageId",
		"startsAt":    "required: an absent field fails decoding as a whole (not JSON, an empty value)",
		"occurredAt":  "as startsAt",
		"price":       "its parts are named: amount, currencyId",
	}
	page, err := os.ReadFile("../../../../docs/contracts/purchase-changed.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(page), "### Bounds")
	require.True(t, ok, "the page has a bounds section")
	_, table, ok = strings.Cut(table, "| field | bound |\n")
	require.True(t, ok, "the bounds section has its table")
	named := map[string]bool{}
	hostile, ok := Named("hostile-records")
	require.True(t, ok)
	for _, r := range hostile.Records {
		if r.Refuse != nil {
			for _, n := range r.Refuse.Naming {
				named[n] = true
			}
		}
	}
	code := regexp.MustCompile("`([A-Za-z.]+)`")
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break // the table's end
		}
		if !strings.HasPrefix(line, "| `") {
			continue // its rule
		}
		rows++
		fields := strings.SplitN(line, "|", 3)[1]
		for _, m := range code.FindAllStringSubmatch(fields, -1) {
			field := m[1][strings.LastIndex(m[1], ".")+1:]
			if _, excused := notOwnRecord[field]; excused {
				continue
			}
			require.True(t, named[field], "the bounds table bounds %s, but no hostile record is refused naming it: add one to hostileRecords", m[1])
		}
	}
	require.Greater(t, rows, 5, "the bounds table was read")
}
