package consumer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNotConsumingNeedsAnOldWaitingRecordAndNoNewMessage: a record waiting
// a minute says nothing while the consumer takes new messages (it is
// catching up); an idle consumer has nothing waiting.
func TestNotConsumingNeedsAnOldWaitingRecordAndNoNewMessage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	for _, c := range []struct {
		name             string
		oldest, received *time.Time
		want             bool
	}{
		{"nothing waits, idle for hours", nil, ago(3 * time.Hour), false},
		{"a record just written", ago(time.Second), ago(3 * time.Hour), false},
		{"catching up on an old backlog", ago(10 * time.Minute), ago(time.Second), false},
		{"stuck: a record waits a minute, nothing new taken", ago(time.Minute), ago(2 * time.Minute), true},
		{"never took anything", ago(5 * time.Minute), nil, true},
	} {
		s := GroupStatus{Group: "boost", LastReceivedAt: c.received}
		require.Equal(t, c.want, s.NotConsuming(c.oldest, now), c.name)
	}
}
