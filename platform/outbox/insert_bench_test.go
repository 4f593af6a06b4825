package outbox_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// rowLayouts are the column types compared for the outbox row: the
// migrated table as it is, and a copy with jsonb columns (docs/performance.md,
// "Outbox row layout"). A bytea payload is not among them: the outbox's insert
// casts the payload to json, which only a json or jsonb column takes.
var rowLayouts = []struct{ name, payload, metadata string }{
	{"migrated", "", ""},
	{"payload-jsonb", "jsonb", "jsonb"},
}

// BenchmarkOutboxInsert measures the outbox insert of one expiry batch: 200
// events of about 1 KB in one Publish, in a transaction of their own
// (insert and commit), and the relay's read of 200 such rows, for each row
// layout in turn, interleaved, so that every layout sees the same machine.
// Run with -benchtime Nx: each iteration is one batch per layout. Reported:
// insert-ms and read-ms medians per layout, and each layout's ratio to the
// migrated one.
func BenchmarkOutboxInsert(b *testing.B) {
	bundle := setup(b)
	topics := make([]string, len(rowLayouts))
	for i, l := range rowLayouts {
		topics[i] = topic
		if l.payload == "" {
			continue
		}
		topics[i] = "pin.bench." + l.name + ".v1"
		table := outbox.TableName(topics[i])
		for _, stmt := range []string{
			`CREATE TABLE ` + table + ` (LIKE ` + outbox.TableName(topic) + ` INCLUDING ALL)`,
			`ALTER TABLE ` + table + ` ALTER COLUMN payload TYPE ` + l.payload + ` USING convert_to(payload::text, 'UTF8')`,
			`ALTER TABLE ` + table + ` ALTER COLUMN metadata TYPE ` + l.metadata + ` USING metadata::text::` + l.metadata,
		} {
			if l.payload != "bytea" {
				stmt = strings.Replace(stmt, `convert_to(payload::text, 'UTF8')`, `payload::text::`+l.payload, 1)
			}
			_, err := bundle.db.SQL.Exec(stmt)
			require.NoError(b, err, stmt)
		}
	}
	batch := func(n int) []*message.Message {
		msgs := make([]*message.Message, 200)
		for i := range msgs {
			msgs[i] = benchEvent(n*200 + i)
		}
		return msgs
	}
	insert := make([][]time.Duration, len(rowLayouts))
	read := make([][]time.Duration, len(rowLayouts))
	b.ResetTimer()
	for n := range b.N {
		for i := range rowLayouts {
			msgs := batch(n)
			started := time.Now()
			require.NoError(b, postgres.InTx(bundle.ctx, bundle.db.Gorm, func(tx postgres.Tx) error {
				return publish(bundle.ctx, bundle.pub, tx, topics[i], msgs...)
			}))
			insert[i] = append(insert[i], time.Since(started))

			started = time.Now()
			rows, err := bundle.db.SQL.Query(`SELECT "offset", uuid, payload, metadata FROM ` + outbox.TableName(topics[i]) +
				` ORDER BY "offset" DESC LIMIT 200`)
			require.NoError(b, err)
			for rows.Next() {
				var offset int64
				var id string
				var payload, metadata []byte
				require.NoError(b, rows.Scan(&offset, &id, &payload, &metadata))
			}
			require.NoError(b, rows.Err())
			read[i] = append(read[i], time.Since(started))
		}
	}
	b.StopTimer()
	base := [2]float64{medianMs(insert[0]), medianMs(read[0])}
	for i, l := range rowLayouts {
		in, rd := medianMs(insert[i]), medianMs(read[i])
		b.ReportMetric(in, "insert-ms/"+l.name)
		b.ReportMetric(rd, "read-ms/"+l.name)
		if i > 0 {
			b.ReportMetric(in/base[0], fmt.Sprintf("insert-x/%s", l.name))
			b.ReportMetric(rd/base[1], fmt.Sprintf("read-x/%s", l.name))
		}
	}
}

func medianMs(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
