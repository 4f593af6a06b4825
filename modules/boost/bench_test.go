package boost_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// benchEvents is the length of the stream BenchmarkBoostConsumer applies:
// half Active, half Cancelled, over 3 partitions.
const benchEvents = 10_000

// BenchmarkBoostConsumer measures how many events one boost consumer applies
// per second, from a standing start on a topic that already holds the whole
// stream (benchEvents records: each purchase's Active then its Cancelled),
// with the inbox, the version guard and the projection each in one
// transaction per event. Run it with -benchtime 1x.
//
// The reference, measured in the same run on another fresh database, is the
// bound the kit's design sets: one committed transaction per event, with one
// worker per partition (3), each transaction inserting one inbox row and
// nothing else. events/s ÷ bound-tx/s is the share of that bound the
// consumer reaches.
func BenchmarkBoostConsumer(b *testing.B) {
	for range b.N {
		bundle := &bundle{db: testbed.NewDatabase(b), brokers: testbed.NewKafka(b, contract.Topic)}
		client, err := kgo.NewClient(kgo.SeedBrokers(bundle.brokers...), kgo.DefaultProduceTopic(contract.Topic),
			kgo.ProducerLinger(5*time.Millisecond))
		require.NoError(b, err)
		var records []*kgo.Record
		for range benchEvents / 2 {
			p := newPurchase(10, project(uuid.New()))
			records = append(records, record(b, p.envelope(contract.StatusActive, 1)), record(b, p.envelope(contract.StatusCancelled, 2)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(b, client.ProduceSync(ctx, records...).FirstErr())
		cancel()
		client.Close()

		started := time.Now()
		bundle.stop = bundle.start(b, bundle.db.Gorm)
		bundle.waitConsumed(b, benchEvents)
		consumer := benchEvents / time.Since(started).Seconds()
		bundle.stop()

		bound := commitBound(b, benchEvents)
		b.Logf("consumer: %.0f events/s; bound (one inbox-row transaction per event, 3 workers): %.0f tx/s; ratio %.2f", consumer, bound, consumer/bound)
		b.ReportMetric(consumer, "events/s")
		b.ReportMetric(bound, "bound-tx/s")
		b.ReportMetric(consumer/bound, "events/bound")
	}
}

// commitBound commits n one-row transactions into consumer.inbox of a fresh
// database from 3 workers and returns transactions per second.
func commitBound(b *testing.B, n int) float64 {
	b.Helper()
	db := testbed.NewDatabase(b)
	var wg sync.WaitGroup
	started := time.Now()
	for w := range 3 {
		wg.Go(func() {
			for i := w; i < n; i += 3 {
				require.NoError(b, db.Gorm.Exec(`INSERT INTO consumer.inbox (consumer, message_id) VALUES ('bound', ?)`, uuid.New()).Error)
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(started).Seconds()
}
