package expiry

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// ExpireCycleResult is what a cycle did. The counters cover the committed
// batches only.
type ExpireCycleResult struct {
	RunID         uuid.UUID
	AsOf          time.Time
	Batches       int
	Expired       int
	SkippedLocked int
	Failed        int
	Duration      time.Duration
	// Backlog is what the cycle left, counted after its batches; nil when
	// it ended on an error before the count.
	Backlog *ExpireBacklog
}

// MarshalJSON writes the line `pin expire-promotions --once` prints
// (interfaces.md).
func (r ExpireCycleResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RunID         string    `json:"runId"`
		AsOf          time.Time `json:"asOf"`
		Expired       int       `json:"expired"`
		SkippedLocked int       `json:"skippedLocked"`
		Failed        int       `json:"failed"`
		DurationMs    int64     `json:"durationMs"`
	}{r.RunID.String(), r.AsOf, r.Expired, r.SkippedLocked, r.Failed, r.Duration.Milliseconds()})
}
