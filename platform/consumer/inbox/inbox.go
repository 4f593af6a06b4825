// Package inbox is the consumer kit's inbox and version guard, the room the
// runner asks, inside each batch's transaction, which events to apply: one
// whose message id the inbox holds is a duplicate, one whose version is not
// above the last applied for its aggregate is stale, the rest pass and have
// their versions recorded once the handler has applied them
// (docs/adr/0006-consumer-kit.md, decision 3). Its statements are the
// kit's store's; the rule is judge, which a test runs without PostgreSQL.
package inbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/platform/consumer/internal/store"
)

// Entry is what the inbox and the guard know of an event.
type Entry struct {
	MessageID   uuid.UUID
	AggregateID string
	Version     int64
}

// Verdict is what the guard decided for one entry.
type Verdict uint8

const (
	// Pass: a new message above its aggregate's last version; to apply.
	Pass Verdict = iota
	// Duplicate: the inbox holds its message id already (a delivery before,
	// or an earlier entry of the same batch).
	Duplicate
	// Stale: a new message whose version is not above its aggregate's last
	// one applied. Its inbox entry stays: this message was seen.
	Stale
)

// Guard records the entries' message ids in consumer's inbox and locks the
// version rows of their aggregates, in q (the batch's transaction), in one
// statement. It returns each entry's verdict and, for one that passes, the
// last version applied for its aggregate before it (0 for none; for the
// second entry of one aggregate in a batch, the first one's version). The
// locks make two deliveries of one aggregate, even across a rebalance,
// queue up.
func Guard(ctx context.Context, q store.Querier, consumer string, entries []Entry) (verdicts []Verdict, lastVersions []int64, err error) {
	messageIDs, aggregateIDs := make([]string, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		messageIDs[i], aggregateIDs[i] = e.MessageID.String(), e.AggregateID
	}
	fresh, last, err := store.Guard(ctx, q, consumer, messageIDs, aggregateIDs)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox and version guard: %w", err)
	}
	verdicts, lastVersions = judge(entries, fresh, last)
	return verdicts, lastVersions, nil
}

// judge is the guard's rule, over what the statement found: fresh, the
// message ids the inbox did not hold, and last, the last version applied
// per aggregate. Entries are in offset order, so the events that pass
// raise their aggregate's version as they go.
func judge(entries []Entry, fresh map[string]bool, last map[string]int64) ([]Verdict, []int64) {
	verdicts, lastVersions := make([]Verdict, len(entries)), make([]int64, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		id := e.MessageID.String()
		if !fresh[id] || seen[id] {
			verdicts[i] = Duplicate
			continue
		}
		seen[id] = true
		if e.Version <= last[e.AggregateID] {
			verdicts[i] = Stale
			continue
		}
		verdicts[i], lastVersions[i] = Pass, last[e.AggregateID]
		last[e.AggregateID] = e.Version
	}
	return verdicts, lastVersions
}

// Record sets, in q, the last version applied of each aggregate whose
// entries passed: the version of its last entry that did. Call it after
// the handler applied them, in the same transaction.
func Record(ctx context.Context, q store.Querier, consumer string, entries []Entry, verdicts []Verdict) error {
	applied := make(map[string]int64)
	for i, e := range entries {
		if verdicts[i] == Pass {
			applied[e.AggregateID] = e.Version
		}
	}
	if len(applied) == 0 {
		return nil
	}
	ids, versions := make([]string, 0, len(applied)), make([]int64, 0, len(applied))
	for id, v := range applied {
		ids, versions = append(ids, id), append(versions, v)
	}
	if err := store.RecordVersions(ctx, q, consumer, ids, versions); err != nil {
		return fmt.Errorf("version guard: %w", err)
	}
	return nil
}
