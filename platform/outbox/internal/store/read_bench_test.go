package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/testbed"
)

// unheldReadQuery is the relay's read as it was before a dead letter held
// its key (b375c89), the reference of BenchmarkRelayRead.
const unheldReadQuery = `SELECT "offset", uuid,
	CASE WHEN octet_length(payload::text) <= $2 THEN payload END,
	metadata, octet_length(payload::text)
FROM outbox.messages WHERE topic = $1 AND acked = false ORDER BY "offset" ASC LIMIT $3 FOR UPDATE`

// BenchmarkRelayRead measures the relay's read of a batch of 200 rows of
// about 1 KB, in its own transaction as the relay reads (FOR UPDATE, then
// rolled back), interleaved on one session: the read before keys were held
// (unheld), today's read with nothing held (the cost of the probe), and
// today's read behind a held chain of 1,000 and 10,000 rows of one key
// (what a chain costs every read). Each outbox keeps 20k acknowledged rows
// beside; first without statistics, then analyzed. Run with -benchtime Nx:
// each iteration is one read per case. Reported: median read-ms per case
// and statistics, and each case's ratio to unheld.
func BenchmarkRelayRead(b *testing.B) {
	db, ctx := testbed.NewDatabase(b), context.Background()
	cases := []struct {
		name, topic string
		held        int
	}{{"unheld", "pin.bench.unheld.v1", 0}, {"probe", "pin.bench.probe.v1", 0},
		{"held-1k", "pin.bench.held1k.v1", 1000}, {"held-10k", "pin.bench.held10k.v1", 10000}}
	tables := []string{Messages}
	for _, c := range cases {
		require.NoError(b, EnsureTopics(ctx, db.SQL, []string{c.topic}))
		for _, stmt := range []string{
			`INSERT INTO outbox.messages (topic, uuid, payload, metadata, acked)
				SELECT $1, gen_random_uuid()::text, json_build_object('pad', repeat('x', 900)), json_build_object('partition_key', 'purchase-' || i), true
				FROM generate_series(1, 20000) AS i`,
			fmt.Sprintf(`INSERT INTO outbox.messages (topic, uuid, payload, metadata)
				SELECT $1, gen_random_uuid()::text, json_build_object('pad', repeat('x', 900)), '{"partition_key":"hot"}'
				FROM generate_series(1, %d)`, c.held),
			`INSERT INTO outbox.messages (topic, uuid, payload, metadata)
				SELECT $1, gen_random_uuid()::text, json_build_object('pad', repeat('x', 900)), json_build_object('partition_key', 'free-' || i)
				FROM generate_series(1, 200) AS i`,
		} {
			_, err := db.SQL.Exec(stmt, c.topic)
			require.NoError(b, err, stmt)
		}
		if c.held > 0 {
			_, err := db.SQL.Exec(`INSERT INTO `+DeadLetters+` (topic, message_id, outbox_offset, payload, metadata, error, attempts)
				VALUES ($1, 'hot-1', 0, '{}', '{"partition_key":"hot"}', 'too_large: bench', 1)`, c.topic)
			require.NoError(b, err)
		}
	}
	read := func(i int) time.Duration {
		c := cases[i]
		q := unheldReadQuery
		if c.name != "unheld" {
			q = readBatchQuery
		}
		args := []any{pgx.QueryExecModeExec, c.topic, 1_000_000, 200}
		started := time.Now()
		tx, err := db.SQL.Begin()
		require.NoError(b, err)
		rows, err := tx.Query(q, args...)
		require.NoError(b, err)
		n := 0
		for rows.Next() {
			n++
		}
		require.NoError(b, rows.Err())
		require.NoError(b, tx.Rollback())
		require.Equal(b, 200, n, c.name)
		return time.Since(started)
	}
	took := map[string][][]time.Duration{}
	b.ResetTimer()
	for _, stats := range []string{"none", "analyzed"} {
		if stats == "analyzed" {
			testbed.Analyze(b, db.SQL, append(tables, DeadLetters)...)
		}
		took[stats] = make([][]time.Duration, len(cases))
		for range b.N {
			for i := range cases {
				took[stats][i] = append(took[stats][i], read(i))
			}
		}
	}
	b.StopTimer()
	for stats, t := range took { // after ResetTimer, which drops reported metrics
		base := medianMs(t[0])
		for i, c := range cases {
			ms := medianMs(t[i])
			b.ReportMetric(ms, fmt.Sprintf("read-ms/%s/stats=%s", c.name, stats))
			if i > 0 {
				b.ReportMetric(ms/base, fmt.Sprintf("read-x/%s/stats=%s", c.name, stats))
			}
		}
	}
}

// medianMs is the median of ds in milliseconds.
func medianMs(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
