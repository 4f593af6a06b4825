package boost_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
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
// per second on a topic that already holds the whole stream (benchEvents
// records: each purchase's Active then its Cancelled), from its first
// acknowledged batch to the last; the time to that first batch (joining the
// group) is reported as startup-s. Run it with -benchtime 1x.
//
// The reference is one committed transaction per event: 3 workers (one per
// partition) each committing one single-row inbox INSERT per event.
// Consumer and reference alternate, PIN_BENCH_CONSUMER_ROUNDS times each
// (default 3), each on a fresh database, and the medians are reported;
// events/bound is the consumer's median over the reference's.
func BenchmarkBoostConsumer(b *testing.B) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("PIN_BENCH_CONSUMER_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for range b.N {
		var consumed, bound, batch, startups []float64
		for round := range rounds {
			perSecond, meanBatch, startup := consumeStream(b)
			consumed, batch, startups = append(consumed, perSecond), append(batch, meanBatch), append(startups, startup.Seconds())
			bound = append(bound, commitBound(b, benchEvents))
			b.Logf("round %d: consumer %.0f events/s (mean batch %.0f events, first batch after %.2f s); reference %.0f tx/s",
				round+1, perSecond, meanBatch, startup.Seconds(), bound[round])
		}
		c, r := median(consumed), median(bound)
		b.Logf("median: consumer %.0f events/s; reference (one commit per event, 3 workers) %.0f tx/s; ratio %.2f", c, r, c/r)
		b.ReportMetric(c, "events/s")
		b.ReportMetric(r, "bound-tx/s")
		b.ReportMetric(c/r, "events/bound")
		b.ReportMetric(median(batch), "events/batch")
		b.ReportMetric(median(startups), "startup-s")
	}
}

// consumeStream puts benchEvents records on a fresh topic, starts one boost
// consumer on a fresh database and returns the events it applied per second
// until all were acknowledged, and the mean events per transaction.
func consumeStream(b *testing.B) (perSecond, meanBatch float64, startup time.Duration) {
	b.Helper()
	bundle := &bundle{db: testbed.NewDatabase(b), brokers: testbed.NewKafka(b, contract.Topic)}
	client, err := kgo.NewClient(kgo.SeedBrokers(bundle.brokers...), kgo.DefaultProduceTopic(contract.Topic),
		kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(b, err)
	defer client.Close()
	records := make([]*kgo.Record, 0, benchEvents)
	for range benchEvents / 2 {
		p := newPurchase(10, project(uuid.New()))
		records = append(records, record(b, p.envelope(contract.StatusActive, 1)), record(b, p.envelope(contract.StatusCancelled, 2)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(b, client.ProduceSync(ctx, records...).FirstErr())

	started := time.Now()
	stop := bundle.start(b, bundle.db.Gorm)
	// The rate counts from the first acknowledged batch: joining the group
	// (a second or two with Sarama) is reported apart, as the start-up it is.
	bundle.waitConsumed(b, 1)
	first, firstAt := bundle.counter(b, "pin_consumer_consumed_total"), time.Now()
	bundle.waitConsumed(b, benchEvents)
	perSecond = (benchEvents - first) / time.Since(firstAt).Seconds()
	startup = firstAt.Sub(started)
	h := testbed.Metric(b, bundle.reg, "pin_consumer_batch_events").GetHistogram()
	stop()
	return perSecond, h.GetSampleSum() / float64(h.GetSampleCount()), startup
}

// commitBound commits n one-row transactions into consumer.inbox of a fresh
// database from 3 workers and returns transactions per second.
func commitBound(b *testing.B, n int) float64 {
	b.Helper()
	db := testbed.NewDatabase(b)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	started := time.Now()
	for w := range 3 {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += 3 {
				errs[w] = db.Gorm.Exec(`INSERT INTO consumer.inbox (consumer, message_id) VALUES ('bound', ?)`, uuid.New()).Error
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(started)
	require.NoError(b, errors.Join(errs...))
	return float64(n) / elapsed.Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
