package main

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestStatusReadsOneSnapshot: while a writer puts a row in the outbox and
// acknowledges it, over and over, every status agrees with itself: a
// backlog of 0 has no oldest unsent row, and a backlog with one has it.
// Read statement by statement, the count and the row came from different
// moments (`backlog 0` beside `oldest unsent … (0.0 s ago)`).
func TestStatusReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	topic := declaredTopics()[0]
	ctx, stop := context.WithCancel(t.Context())
	written := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			_, err := db.SQL.ExecContext(ctx, `INSERT INTO outbox.messages (uuid, topic, payload, metadata)
				VALUES (gen_random_uuid()::text, $1, '{}', '{}')`, topic)
			if err == nil {
				_, err = db.SQL.ExecContext(ctx, `UPDATE outbox.messages SET acked = true WHERE topic = $1 AND NOT acked`, topic)
			}
			if err != nil && ctx.Err() == nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	defer func() {
		stop()
		if err := <-written; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
	}()
	seen := map[bool]int{} // reads that found a row waiting, and that found none
	for range 300 {
		s, err := readStatus(t.Context(), db.SQL, config.Config{})
		require.NoError(t, err)
		require.Len(t, s.Outbox, len(declaredTopics()))
		o := s.Outbox[0]
		require.Equal(t, o.Backlog > 0, o.Oldest != nil, "backlog %d with oldest %+v", o.Backlog, o.Oldest)
		seen[o.Oldest != nil]++
	}
	t.Logf("reads with a row waiting: %d, with none: %d", seen[true], seen[false])
}
