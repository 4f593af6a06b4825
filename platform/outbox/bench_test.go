package outbox_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// BenchmarkCommitToKafka measures the relay with RelayConfig's defaults on
// real PostgreSQL and kfake; each iteration is a whole measurement, so run
// it with -benchtime 1x. Sub-benchmarks: latency-200eps (commit to
// consumer), drain (a 20k backlog from a standing start, never analyzed),
// drain-analyzed (the same, analyzed before the relay starts) and
// sustained (steps of offered load, PIN_BENCH_SUSTAINED_STEPS; a step is
// sustained when the backlog stops growing). What each reports, and the figures, are
// in docs/performance.md.
func BenchmarkCommitToKafka(b *testing.B) {
	b.Run("latency-200eps", func(b *testing.B) {
		for range b.N {
			rig := newBenchRig(b)
			r := rig.offer(b, 200, 10*time.Second, 1, 1)
			b.ReportMetric(r.p(50), "p50-ms")
			b.ReportMetric(r.p(99), "p99-ms")
			b.ReportMetric(r.p(100), "max-ms")
		}
	})
	drain := func(analyzed bool) func(b *testing.B) {
		return func(b *testing.B) {
			const backlog = 20_000
			for range b.N {
				rig := newBenchRig(b)
				rig.prefill(b, backlog)
				if analyzed {
					testbed.Analyze(b, rig.db.SQL)
				}
				started := time.Now()
				rig.startRelay(b)
				rig.waitDelivered(b, backlog, time.Minute)
				b.ReportMetric(backlog/time.Since(started).Seconds(), "events/s")
			}
		}
	}
	b.Run("drain", drain(false))
	// The backlog analyzed as it waits, as autovacuum may on a table whose
	// acknowledged rows the retention has deleted (migration 00014).
	b.Run("drain-analyzed", drain(true))
	b.Run("sustained", func(b *testing.B) {
		for range b.N {
			steps := sustainedSteps(b)
			best := 0.0
			for _, rate := range steps {
				rig := newBenchRig(b)
				r := rig.offer(b, rate, 8*time.Second, 10, 4)
				b.Logf("offered %5.0f events/s: committed %5.0f/s, delivered %5.0f/s, backlog slope %+6.0f events/s, end backlog %5d, p50 %6.1f ms, p99 %7.1f ms, sustained %v",
					rate, r.committedRate, r.deliveredRate, r.backlogSlope, r.endBacklog, r.p(50), r.p(99), r.sustained(rate))
				if !r.sustained(rate) {
					break
				}
				best = rate
				b.ReportMetric(r.p(99), fmt.Sprintf("p99-ms@%.0f", rate))
			}
			b.ReportMetric(best, "max-sustained-events/s")
		}
	})
}

func sustainedSteps(tb testing.TB) []float64 {
	tb.Helper()
	spec := os.Getenv("PIN_BENCH_SUSTAINED_STEPS")
	if spec == "" {
		spec = "2000,4000,6000,8000,10000"
	}
	var out []float64
	for _, s := range strings.Split(spec, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		require.NoError(tb, err, "PIN_BENCH_SUSTAINED_STEPS")
		out = append(out, v)
	}
	return out
}

// benchRig is one database, one kfake cluster, a consumer that notes when
// each record first arrives, and (once started) a relay.
type benchRig struct {
	testBundle
	brokers []string

	relayOnce sync.Once
	mu        sync.Mutex
	committed map[string]time.Time
	arrived   map[string]time.Time
	delivered atomic.Int64
}

func newBenchRig(b testing.TB) *benchRig {
	b.Helper()
	r := &benchRig{testBundle: setup(b), committed: map[string]time.Time{}, arrived: map[string]time.Time{}}
	r.brokers = testbed.NewKafka(b, topic)
	c := newConsumer(b, r.brokers)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := c.cl.PollFetches(ctx)
			now := time.Now() // when the records reached the consumer
			r.mu.Lock()
			fetches.EachRecord(func(rec *kgo.Record) {
				id := headers(rec)["message_id"]
				if _, seen := r.arrived[id]; !seen {
					r.arrived[id] = now
					r.delivered.Add(1)
				}
			})
			r.mu.Unlock()
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return r
}

// startRelay starts the rig's relay, once.
func (r *benchRig) startRelay(b testing.TB) {
	b.Helper()
	// The production defaults, as pin serve runs with PIN_OUTBOX_* unset.
	r.relayOnce.Do(func() {
		r.testBundle.startRelay(b, relay.Config{Brokers: r.brokers, PollInterval: config.Defaults().OutboxPollInterval}, nil)
	})
}

// prefill commits n events in one set-based INSERT ... SELECT
// generate_series, in the row layout the Publisher writes, keyed over 500
// purchases.
func (r *benchRig) prefill(b testing.TB, n int) {
	b.Helper()
	_, err := r.db.SQL.Exec(`INSERT INTO outbox.messages (topic, uuid, payload, metadata)
	SELECT '`+topic+`', g.id,
		json_build_object('key', 'purchase-' || g.i % 500, 'seq', g.i, 'pad', repeat('x', 900)),
		json_build_object('partition_key', 'purchase-' || g.i % 500,
			'event_type', 'pin.promotion.purchase-changed', 'contract_version', '1', 'correlation_id', g.id)
	FROM (SELECT i, gen_random_uuid()::text AS id FROM generate_series(1, $1::int) AS i) AS g`, n)
	require.NoError(b, err)
}

func (r *benchRig) waitDelivered(b testing.TB, n int, within time.Duration) {
	b.Helper()
	deadline := time.Now().Add(within)
	for r.delivered.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events delivered within %s", r.delivered.Load(), n, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// offerResult is what one period of offered load did.
type offerResult struct {
	committedRate, deliveredRate float64
	// backlogSlope is the growth of committed-minus-delivered over the
	// second half of the period, by least squares, in events/s.
	backlogSlope float64
	endBacklog   int64
	latencies    []time.Duration
}

// p returns the q-th percentile latency in milliseconds (100 = max).
func (o offerResult) p(q int) float64 {
	if len(o.latencies) == 0 {
		return 0
	}
	i := min(len(o.latencies)*q/100, len(o.latencies)-1)
	return float64(o.latencies[i]) / float64(time.Millisecond)
}

// sustained: the writers offered at least 95% of the rate, and the backlog
// grew by less than 5% of the rate per second over the second half.
func (o offerResult) sustained(rate float64) bool {
	return o.committedRate >= 0.95*rate && o.backlogSlope < 0.05*rate
}

// offer starts the relay and commits events at rate for d, perTx
// events per transaction from writers goroutines, then waits until every
// event was delivered and returns the figures. Commit and arrival times
// are joined at the end (a record may arrive before its writer noted the
// commit).
func (r *benchRig) offer(b testing.TB, rate float64, d time.Duration, perTx, writers int) offerResult {
	b.Helper()
	r.startRelay(b)
	total := int(rate * d.Seconds())
	var seq atomic.Int64
	delivered0 := r.delivered.Load()
	r.mu.Lock()
	clear(r.committed) // latencies of this period only
	base := len(r.arrived)
	r.mu.Unlock()
	var committedN atomic.Int64
	interval := time.Duration(float64(time.Second) * float64(perTx*writers) / rate)
	started := time.Now()
	stopSampling := make(chan struct{})
	type sample struct {
		at      time.Duration
		backlog int64
	}
	var samples []sample
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				samples = append(samples, sample{time.Since(started), committedN.Load() - (r.delivered.Load() - delivered0)})
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writers start staggered so that commits spread evenly.
			next := started.Add(interval * time.Duration(w) / time.Duration(writers))
			for {
				first := int(seq.Add(int64(perTx))) - perTx
				if first >= total {
					return
				}
				time.Sleep(time.Until(next))
				next = next.Add(interval)
				msgs := make([]*message.Message, 0, perTx)
				for i := first; i < min(first+perTx, total); i++ {
					msgs = append(msgs, benchEvent(base+i))
				}
				if !assert.NoError(b, r.tryPublish(msgs...)) {
					return
				}
				at := time.Now()
				r.mu.Lock()
				for _, m := range msgs {
					r.committed[m.UUID] = at
				}
				r.mu.Unlock()
				committedN.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	offeredFor := time.Since(started)
	close(stopSampling)
	<-sampled
	res := offerResult{
		committedRate: float64(total) / offeredFor.Seconds(),
		endBacklog:    committedN.Load() - (r.delivered.Load() - delivered0),
	}
	r.waitDelivered(b, int(delivered0)+total, time.Minute)
	res.deliveredRate = float64(total) / time.Since(started).Seconds()

	var xs, ys []float64
	for _, s := range samples {
		if s.at >= d/2 {
			xs, ys = append(xs, s.at.Seconds()), append(ys, float64(s.backlog))
		}
	}
	res.backlogSlope = slope(xs, ys)

	r.mu.Lock()
	defer r.mu.Unlock()
	for id, at := range r.committed {
		got, ok := r.arrived[id]
		require.True(b, ok, "event %s delivered", id)
		res.latencies = append(res.latencies, max(got.Sub(at), 0))
	}
	slices.Sort(res.latencies)
	return res
}

// benchEvent is event number i, keyed over 500 purchases, with a payload of
// about the size of a purchase-changed event (1 KB).
func benchEvent(i int) *message.Message {
	msg := event(fmt.Sprintf("purchase-%d", i%500), i)
	msg.Payload = fmt.Appendf(nil, `{"key":"purchase-%d","seq":%d,"pad":%q}`, i%500, i, strings.Repeat("x", 900))
	return msg
}

// slope is the least-squares slope of ys over xs (0 with fewer than 2).
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, sxy = sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
