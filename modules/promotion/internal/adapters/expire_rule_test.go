package adapters

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/migrations"
)

// The expiry's rule, "an Active purchase whose ends_at is at or before the
// cycle's as-of", is one SQL function, promotion.expiry_due (migration
// 00013), that the planner inlines; every statement that reads the due rows
// calls it and none spells the rule again.
var dueCall = regexp.MustCompile(`promotion\.expiry_due\((\w+), (@as_of|coalesce\(\$1::timestamptz, now\(\)\))\)`)

// activeStatus finds each place a statement names the Active status.
var activeStatus = regexp.MustCompile(`(\w+\.)?status = 'Active'`)

// notTheExpiry are the statements that select Active purchases by another
// rule, on purpose.
var notTheExpiry = map[string]string{
	"snapshot_select_batch.sql": "the snapshot's default selection: every Active purchase, due or not",
}

// TestExpiryDueRuleIsOneDefinition: the adapters' SQL names the Active
// status only where it is not the expiry's rule; each statement that reads
// the due rows calls promotion.expiry_due; and the function and the partial
// index it is planned on say the same status, so the inlined rule implies
// the index's predicate.
func TestExpiryDueRuleIsOneDefinition(t *testing.T) {
	t.Parallel()
	sources := map[string]string{}
	files, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	goFiles, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range append(files, goFiles...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sources[filepath.Base(f)] = string(b)
	}
	due := map[string]int{}
	for name, src := range sources {
		for _, m := range activeStatus.FindAllStringIndex(src, -1) {
			line := src[:m[0]]
			if i := strings.LastIndex(line, "\n"); i >= 0 {
				line = line[i+1:]
			}
			if strings.HasPrefix(strings.TrimSpace(line), "--") || strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // a comment that names the rule
			}
			_, ok := notTheExpiry[name]
			require.True(t, ok, "%s spells the status itself: %.80q; call promotion.expiry_due", name, src[m[0]:])
		}
		due[name] += len(dueCall.FindAllString(src, -1))
		require.Equal(t, due[name], strings.Count(src, "expiry_due("), "%s: promotion.expiry_due(row, as-of), as the regexp reads it", name)
		if due[name] == 0 {
			delete(due, name)
		}
	}
	// Each statement that reads the due rows; a new one is added here, so
	// it is read against the rule.
	require.Equal(t, map[string]int{
		"expire_select_batch.sql":  4, // kept, due, retry and the skipped window
		"expire_count_skipped.sql": 1,
		"expire_backlog.sql":       1, // CountBacklog and ReadExpiryStatus
	}, due)

	index, err := migrations.FS.ReadFile("00002_promotion.sql")
	require.NoError(t, err)
	require.Contains(t, string(index), "CREATE INDEX promotion_purchases_expiry_idx\n\tON promotion.promotion_purchases (ends_at, id) WHERE status = 'Active';")
	function, err := migrations.FS.ReadFile("00013_expiry_due.sql")
	require.NoError(t, err)
	require.Contains(t, string(function), "RETURN p.status = 'Active' AND p.ends_at <= as_of;")
}
