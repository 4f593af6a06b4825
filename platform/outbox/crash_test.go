package outbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

const (
	childDBEnv      = "PIN_OUTBOX_CHILD_DATABASE_URL"
	childBrokersEnv = "PIN_OUTBOX_CHILD_BROKERS"
)

// TestRelayChildProcess is the relay process that TestSIGKILLOfTheActiveRelay
// kills; it does nothing in a normal run.
func TestRelayChildProcess(t *testing.T) {
	url := os.Getenv(childDBEnv)
	if url == "" {
		t.Skip("only runs as the child of TestSIGKILLOfTheActiveRelay")
	}
	ctx := context.Background()
	gdb, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	db, err := gdb.DB()
	require.NoError(t, err)
	r, err := outbox.NewRelay(db, outbox.RelayConfig{
		Brokers:      strings.Split(os.Getenv(childBrokersEnv), ","),
		Topics:       []string{topic},
		PollInterval: 10 * time.Millisecond,
		BatchSize:    10,
	}, testLogger(), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	require.NoError(t, r.Run(ctx)) // until killed
}

// TestSIGKILLOfTheActiveRelay kills the process of the active relay under
// traffic: a standby with the production lock retry (1s) relays within 5s,
// and every message arrives, in order per key.
func TestSIGKILLOfTheActiveRelay(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)

	child := exec.Command(os.Args[0], "-test.run=^TestRelayChildProcess$", "-test.count=1")
	child.Env = append(os.Environ(), childDBEnv+"="+b.db.URL, childBrokersEnv+"="+strings.Join(brokers, ","))
	require.NoError(t, child.Start())
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	t.Cleanup(func() { _ = child.Process.Kill(); <-exited })

	// Traffic throughout: a transaction of one event per key every 5ms.
	const keys = 6
	var published atomic.Int64
	stopWriting := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := 1; ; seq++ {
			select {
			case <-stopWriting:
				return
			case <-time.After(5 * time.Millisecond):
			}
			msgs := make([]*message.Message, 0, keys)
			for k := range keys {
				msgs = append(msgs, event(fmt.Sprintf("purchase-%d", k), seq))
			}
			if !assert.NoError(t, b.tryPublish(msgs...)) {
				return
			}
			published.Add(keys)
		}
	})
	c := newConsumer(t, brokers)
	c.until(t, 60) // the child is the active relay

	standby := prometheus.NewRegistry()
	b.startRelay(t, outbox.RelayConfig{Brokers: brokers, LockRetryInterval: time.Second}, standby)
	require.Zero(t, metricValue(t, standby, "pin_outbox_relay_active"), "the child holds the lock")

	require.NoError(t, child.Process.Kill()) // SIGKILL: no cleanup, no last ack
	killed := time.Now()
	<-exited
	waitFor(t, "the standby to relay", func() bool { return metricValue(t, standby, "pin_outbox_published_total") > 0 })
	takeover := time.Since(killed)
	t.Logf("the standby relayed %v after the SIGKILL", takeover)
	require.Less(t, takeover, 5*time.Second)

	close(stopWriting)
	wg.Wait()
	total := int(published.Load())
	seen := requireOrderedPerKey(t, c.untilDistinct(t, total))
	require.Len(t, seen, total, "nothing lost")
	dups := len(c.records) - len(seen)
	t.Logf("%d records for %d messages: %d sent again after the SIGKILL", len(c.records), len(seen), dups)
	require.LessOrEqual(t, dups, 10, "at most the child's batch in flight (10) is sent again")
}
