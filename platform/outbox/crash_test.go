package outbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
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

// TestForwarderChildProcess is the forwarder process that
// TestCrashLosesNothing kills; it does nothing in a normal run.
func TestForwarderChildProcess(t *testing.T) {
	url := os.Getenv(childDBEnv)
	if url == "" {
		t.Skip("only runs as the child of TestCrashLosesNothing")
	}
	ctx := context.Background()
	gdb, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	db, err := gdb.DB()
	require.NoError(t, err)
	f, err := outbox.NewForwarder(db, outbox.ForwarderConfig{
		Brokers:      strings.Split(os.Getenv(childBrokersEnv), ","),
		Topics:       []string{topic},
		PollInterval: 10 * time.Millisecond,
		BatchSize:    10,
	}, testLogger(), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	require.NoError(t, f.Run(ctx)) // until killed
}

func TestCrashLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)

	child := exec.Command(os.Args[0], "-test.run=^TestForwarderChildProcess$", "-test.count=1")
	child.Env = append(os.Environ(), childDBEnv+"="+b.db.URL, childBrokersEnv+"="+strings.Join(brokers, ","))
	require.NoError(t, child.Start())
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	t.Cleanup(func() { _ = child.Process.Kill(); <-exited })

	// Publish while the child forwards, and kill it in the middle.
	const keys, perKey = 6, 100
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 1; seq <= perKey; seq++ {
			msgs := make([]*message.Message, 0, keys)
			for k := range keys {
				msgs = append(msgs, event(fmt.Sprintf("purchase-%d", k), seq))
			}
			b.publish(t, msgs...)
		}
	}()
	c := newConsumer(t, brokers)
	c.until(t, 150)
	require.NoError(t, child.Process.Kill()) // SIGKILL: no cleanup, no last ack
	<-exited
	wg.Wait()

	b.startForwarder(t, outbox.ForwarderConfig{Brokers: brokers}, nil)
	deadline := time.Now().Add(testbed.ForwardDeadline)
	var seen map[string]int
	for {
		seen = requireOrderedPerKey(t, c.records)
		if len(seen) == keys*perKey {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d messages arrived", len(seen), keys*perKey)
		c.until(t, len(c.records)+1)
	}
	dups := len(c.records) - len(seen)
	t.Logf("%d records for %d messages: %d redelivered after the crash", len(c.records), len(seen), dups)
	require.LessOrEqual(t, dups, 10*keys, "at most about one batch is forwarded again")
}
