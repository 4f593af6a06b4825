package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/testbed"
)

// BenchmarkCommitToKafka measures, on real PostgreSQL and kfake:
//
//   - latency: events committed one per transaction at about 200/s; the
//     time from the commit returning to the record arriving at a consumer,
//     reported as p50-ms and p99-ms;
//   - throughput: events committed as fast as 4 writers can, one or 20
//     events per transaction, reported as events/s from the first commit to
//     the last record consumed (and commits/s of the writers alone). With 20
//     per transaction the forwarder, not the writers, is the bottleneck.
//
// Run with a fixed count, e.g.
//
//	go test -run '^$' -bench CommitToKafka -benchtime 1000x ./platform/outbox/
func BenchmarkCommitToKafka(b *testing.B) {
	for _, poll := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency-200rps-poll%s", poll), func(b *testing.B) {
			benchLatency(b, poll)
		})
	}
	b.Run("throughput-1-per-tx", func(b *testing.B) { benchThroughput(b, 1) })
	b.Run("throughput-20-per-tx", func(b *testing.B) { benchThroughput(b, 20) })
}

func benchLatency(b *testing.B, poll time.Duration) {
	tb := setup(b)
	brokers := testbed.NewKafka(b, topic)
	tb.startForwarder(b, outbox.ForwarderConfig{Brokers: brokers, PollInterval: poll}, nil)
	c := newConsumer(b, brokers)

	// Commit and arrival times are joined at the end: a record may reach
	// the consumer before the publishing goroutine noted its commit time.
	committed := make(map[string]time.Time, b.N)
	arrived := make(map[string]time.Time, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.N)*5*time.Millisecond+testbed.ForwardDeadline)
		defer cancel()
		for len(arrived) < b.N && ctx.Err() == nil {
			fetches := c.cl.PollFetches(ctx)
			now := time.Now() // when the records reached the consumer
			fetches.EachRecord(func(r *kgo.Record) { arrived[headers(r)["message_id"]] = now })
		}
	}()

	b.ResetTimer()
	tick := time.NewTicker(5 * time.Millisecond) // 200 events/s
	defer tick.Stop()
	for i := range b.N {
		<-tick.C
		msg := event(fmt.Sprintf("purchase-%d", i%50), i)
		tb.publish(b, msg)
		committed[msg.UUID] = time.Now()
	}
	<-done
	b.StopTimer()
	latencies := make([]time.Duration, 0, b.N)
	for id, at := range committed {
		if got, ok := arrived[id]; ok {
			latencies = append(latencies, max(got.Sub(at), 0))
		}
	}
	require.Len(b, latencies, b.N)
	slices.Sort(latencies)
	b.ReportMetric(ms(latencies[len(latencies)/2]), "p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
	b.ReportMetric(ms(latencies[len(latencies)-1]), "max-ms")
}

func benchThroughput(b *testing.B, perTx int) {
	tb := setup(b)
	brokers := testbed.NewKafka(b, topic)
	c := newConsumer(b, brokers)
	tb.startForwarder(b, outbox.ForwarderConfig{Brokers: brokers}, nil)

	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				first := next.Add(int64(perTx)) - int64(perTx)
				if first >= int64(b.N) {
					return
				}
				msgs := make([]*message.Message, 0, perTx)
				for i := first; i < min(first+int64(perTx), int64(b.N)); i++ {
					msgs = append(msgs, event(fmt.Sprintf("purchase-%d", i%50), int(i)))
				}
				tb.publish(b, msgs...)
			}
		}()
	}
	wg.Wait()
	committedIn := time.Since(start)
	c.until(b, b.N)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/committedIn.Seconds(), "committed-events/s")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
