package outbox_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestBrokerDownTenSecondsUnderTraffic refuses every produce request for
// 10s (the broker closes the connection) while events are committed every
// 20ms, with the relay's production backoff: writers never wait, nothing is
// acknowledged that Kafka did not take, and once the broker is back every
// event arrives, in order per key.
func TestBrokerDownTenSecondsUnderTraffic(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("keeps the broker down for 10s")
	}
	b := setup(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(testbed.KafkaPartitions, topic))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	var down atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("broker down"), true
		}
		return nil, nil, false
	})
	brokers := cluster.ListenAddrs()
	reg := prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers}, reg)

	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := 1; ; seq++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			started := time.Now()
			if !assert.NoError(t, b.tryPublish(event(fmt.Sprintf("purchase-%d", seq%3), seq))) {
				return
			}
			assert.Less(t, time.Since(started), 2*time.Second, "a commit never waits for Kafka")
			written.Add(1)
		}
	})
	c := newConsumer(t, brokers)
	c.until(t, 20)
	down.Store(true)
	refused := metricValue(t, reg, "pin_outbox_publish_errors_total")
	time.Sleep(10 * time.Second) // the outage's length, traffic going on
	// The relay met the outage (a backlog alone would hold had it not run).
	require.Greater(t, metricValue(t, reg, "pin_outbox_publish_errors_total"), refused, "the relay never met the outage")
	backlog, _, _ := b.stats(t)
	require.Positive(t, backlog, "what Kafka refused stays unacknowledged")
	down.Store(false)
	time.Sleep(time.Second) // traffic after the outage
	close(stop)
	wg.Wait()

	total := int(written.Load())
	seen := requireOrderedPerKey(t, c.untilDistinct(t, total))
	require.Len(t, seen, total, "every event after the outage")
	waitFor(t, "the backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })
	require.Positive(t, metricValue(t, reg, "pin_outbox_publish_errors_total"))
	t.Logf("%d events, %d records, %d sent twice", total, len(c.records), len(c.records)-len(seen))
}
