package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
	"github.com/pinmarket/pin/platform/postgres"
)

// A held key: while a record of a key waits in the dead letters (neither
// replayed nor discarded), the relay sends none of the key's later records,
// so each key's records reach Kafka in outbox order, always. The state is
// the dead-letter table itself (store.heldRow), so every relay instance and every operator
// command sees the same. See docs/adr/0015-a-message-kafka-never-takes.md,
// decision 8.

// HeldKeys says which records of a topic wait behind a dead letter of their
// key: the relay sends them once it is replayed or discarded.
type HeldKeys struct {
	// Keys is how many keys have a dead letter waiting.
	Keys int64 `json:"keys"`
	// Records is how many outbox rows wait behind them.
	Records int64 `json:"records"`
	// Oldest is the key held longest; null when none is.
	Oldest *HeldKey `json:"oldest"`
}

// HeldKey is a key held by a dead letter, and since when.
type HeldKey struct {
	Key string `json:"key"`
	// DeadLetterID is the dead letter that holds it: replay or discard it.
	DeadLetterID int64     `json:"deadLetterId"`
	MessageID    string    `json:"messageId"`
	Since        time.Time `json:"since"`
	AgeSeconds   float64   `json:"ageSeconds"`
}

// readHeld reads the held keys of topic.
func readHeld(ctx context.Context, db postgres.Querier, topic string) (HeldKeys, error) {
	raw, err := store.HeldCounts(ctx, db, topic)
	if err != nil {
		return HeldKeys{}, fmt.Errorf("outbox: held keys of %s: %w", topic, err)
	}
	h := HeldKeys{Keys: raw.Keys, Records: raw.Records}
	if raw.OldestDeadLetterID.Valid {
		h.Oldest = &HeldKey{Key: raw.OldestKey.String, DeadLetterID: raw.OldestDeadLetterID.Int64, MessageID: raw.OldestMessageID.String,
			Since: raw.OldestSince.Time.UTC(), AgeSeconds: max(raw.OldestAgeSeconds.Float64, 0)}
	}
	return h, nil
}
