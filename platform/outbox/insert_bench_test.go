package outbox_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
)

// BenchmarkOutboxInsert measures the outbox write of one expiry batch: 200
// events of about 1 KB in one Write (one outbox.publish call), in a
// transaction of their own (write and commit), and the relay's read of 200
// such rows. Run with -benchtime Nx: each iteration is one batch. Reported:
// insert-ms and read-ms medians. The jsonb row layout it once compared
// (docs/performance.md, "Outbox row layout") cannot be a partition of
// outbox.messages, whose columns every topic shares, so it is measured no more.
func BenchmarkOutboxInsert(b *testing.B) {
	bundle := setup(b)
	var insert, read []time.Duration
	b.ResetTimer()
	for n := range b.N {
		msgs := make([]*message.Message, 200)
		for i := range msgs {
			msgs[i] = benchEvent(n*200 + i)
		}
		started := time.Now()
		require.NoError(b, postgres.InTx(bundle.ctx, bundle.db.Gorm, func(tx postgres.Tx) error {
			return publish(bundle.ctx, bundle.pub, tx, topic, msgs...)
		}))
		insert = append(insert, time.Since(started))

		started = time.Now()
		rows, err := bundle.db.SQL.Query(`SELECT "offset", uuid, payload, metadata FROM outbox.messages WHERE topic = $1
			ORDER BY "offset" DESC LIMIT 200`, topic)
		require.NoError(b, err)
		for rows.Next() {
			var offset int64
			var id string
			var payload, metadata []byte
			require.NoError(b, rows.Scan(&offset, &id, &payload, &metadata))
		}
		require.NoError(b, rows.Err())
		read = append(read, time.Since(started))
	}
	b.StopTimer()
	b.ReportMetric(medianMs(insert), "insert-ms")
	b.ReportMetric(medianMs(read), "read-ms")
}

func medianMs(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
