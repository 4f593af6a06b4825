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

// The expiry's rule, "an Active purchase whose ends_at has passed", is
// written as SQL in each statement that reads the due rows: a function or
// view would need a migration, and SQL text joined at run time is ruled out.
// dueRule is its one spelling; TestExpiryDueRuleIsOneSpelling holds every
// statement to it.
var dueRule = regexp.MustCompile(`^ AND (\w+\.)?ends_at <= (@as_of|coalesce\(\$1::timestamptz, now\(\)\))`)

// activeStatus finds each place a statement names the Active status.
var activeStatus = regexp.MustCompile(`(\w+\.)?status = 'Active'`)

// notTheExpiry are the statements that select Active purchases by another
// rule, on purpose.
var notTheExpiry = map[string]string{
	"snapshot_select_batch.sql": "the snapshot's default selection: every Active purchase, due or not",
}

// TestExpiryDueRuleIsOneSpelling: wherever the adapters' SQL names the
// Active status for the expiry, it is followed by the same ends_at bound
// (the alias aside), so no statement counts or takes the backlog by a rule
// of its own; and the partial index the statements are planned on is the
// rule's first half, so each of them can use it.
func TestExpiryDueRuleIsOneSpelling(t *testing.T) {
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
		for _, m := range activeStatus.FindAllStringSubmatchIndex(src, -1) {
			line := src[:m[0]]
			if i := strings.LastIndex(line, "\n"); i >= 0 {
				line = line[i+1:]
			}
			if strings.HasPrefix(strings.TrimSpace(line), "--") || strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // a comment that names the rule
			}
			if _, ok := notTheExpiry[name]; ok {
				continue
			}
			rest := src[m[1]:]
			bound := dueRule.FindStringSubmatch(rest)
			require.NotNil(t, bound, "%s: %q is not followed by the expiry's ends_at bound: %.60q", name, src[m[0]:m[1]], rest)
			alias := ""
			if m[2] >= 0 {
				alias = src[m[2]:m[3]]
			}
			require.Equal(t, alias, bound[1], "%s: status and ends_at of one row", name)
			due[name]++
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
}
