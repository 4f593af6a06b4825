package deadletters

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// firstWaiting is how many waiting records a listed dead letter names.
const firstWaiting = 10

// readWaiting sets what waits behind d, a waiting dead letter: the older
// dead letter of its key it waits behind, or the key's outbox records that
// wait behind it.
func readWaiting(ctx context.Context, db *sql.DB, d *DeadLetter) error {
	if d.Key == "" {
		return nil // holds nothing
	}
	var err error
	d.WaitsBehind, err = store.OlderDeadLetter(ctx, db, d.Topic, d.Key, d.ID)
	if err != nil || d.WaitsBehind != 0 {
		return wrapWaiting(d, err)
	}
	rows, err := store.WaitingRecords(ctx, db, d.Topic, d.Key, firstWaiting)
	if err != nil {
		return wrapWaiting(d, err)
	}
	defer rows.Close()
	for rows.Next() {
		var o store.OutboxRow
		if err := rows.Scan(&o.Offset, &o.MessageID, &o.CreatedAt, &o.AgeSeconds, &d.WaitingRecords); err != nil {
			return wrapWaiting(d, err)
		}
		o.CreatedAt = o.CreatedAt.UTC()
		d.FirstWaiting = append(d.FirstWaiting, o)
	}
	return wrapWaiting(d, rows.Err())
}

func wrapWaiting(d *DeadLetter, err error) error {
	if err != nil {
		return fmt.Errorf("outbox: records waiting behind dead letter %d: %w", d.ID, err)
	}
	return nil
}
