package inbox

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestJudgeIsTheGuardsRule runs the guard's rule without PostgreSQL: a
// message the inbox held, or met earlier in the batch, is a duplicate; one
// at or below its aggregate's last version is stale, and the inbox keeps
// it; within a batch, each event of one aggregate passes above the one
// before it, which it is told as its last version.
func TestJudgeIsTheGuardsRule(t *testing.T) {
	t.Parallel()
	seenBefore, twice, first, second, below, other := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	entries := []Entry{
		{MessageID: seenBefore, AggregateID: "a", Version: 9},
		{MessageID: first, AggregateID: "a", Version: 4},
		{MessageID: twice, AggregateID: "b", Version: 1},
		{MessageID: twice, AggregateID: "b", Version: 1},
		{MessageID: second, AggregateID: "a", Version: 5},
		{MessageID: below, AggregateID: "a", Version: 5},
		{MessageID: other, AggregateID: "c", Version: 2},
	}
	fresh := map[string]bool{first.String(): true, twice.String(): true, second.String(): true, below.String(): true, other.String(): true}
	last := map[string]int64{"a": 3, "c": 2}

	verdicts, lastVersions := judge(entries, fresh, last)
	require.Equal(t, []Verdict{Duplicate, Pass, Pass, Duplicate, Pass, Stale, Stale}, verdicts)
	require.Equal(t, []int64{0, 3, 0, 0, 4, 0, 0}, lastVersions)
}
