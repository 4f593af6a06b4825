package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

const (
	childDBEnv      = "PIN_OUTBOX_CHILD_DATABASE_URL"
	childBrokersEnv = "PIN_OUTBOX_CHILD_BROKERS"
	// childHoldEnv names a file: the child logs JSON to stderr, and holds
	// its first send to Kafka (logging holdingSend) until the file exists.
	childHoldEnv = "PIN_OUTBOX_CHILD_HOLD_FILE"
	holdingSend  = "child: holding its first send"
)

// TestRelayChildProcess is the relay process that TestSIGKILLOfTheActiveRelay
// kills and TestSIGSTOPOfTheActiveRelay freezes; it does nothing in a normal
// run.
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
	cfg := relay.Config{
		Brokers:      strings.Split(os.Getenv(childBrokersEnv), ","),
		Topics:       []string{topic},
		PollInterval: 10 * time.Millisecond,
		BatchSize:    10,
	}
	logger := testLogger()
	if file := os.Getenv(childHoldEnv); file != "" {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
		sends := newHeldSends()
		cfg.Sarama = sends.sarama()
		go func() {
			<-sends.held
			logger.Info(holdingSend)
			for _, err := os.Stat(file); err != nil; _, err = os.Stat(file) {
				time.Sleep(10 * time.Millisecond)
			}
			sends.release()
		}()
	}
	r, err := relay.New(db, cfg, logger, prometheus.NewRegistry(), noop.NewTracerProvider())
	require.NoError(t, err)
	require.NoError(t, r.Run(ctx)) // until killed
}

// relayChild is a relay process (TestRelayChildProcess).
type relayChild struct {
	proc   *os.Process
	out    *testbed.LogBuffer // its stderr
	exited chan struct{}
}

// startRelayChild starts a relay process on b's database and brokers, with
// env added to its environment. It is woken (if stopped) and killed when t
// ends.
func startRelayChild(t *testing.T, b testBundle, brokers []string, env ...string) *relayChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRelayChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{childDBEnv + "=" + b.db.URL, childBrokersEnv + "=" + strings.Join(brokers, ",")}, env...)...)
	c := &relayChild{out: &testbed.LogBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = c.out
	require.NoError(t, cmd.Start())
	c.proc = cmd.Process
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { _ = c.proc.Signal(syscall.SIGCONT); _ = c.proc.Kill(); <-c.exited })
	return c
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

	child := startRelayChild(t, b, brokers)

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
	b.startRelay(t, relay.Config{Brokers: brokers, LockRetryInterval: time.Second}, standby)
	require.Zero(t, metricValue(t, standby, "pin_outbox_relay_active"), "the child holds the lock")

	require.NoError(t, child.proc.Kill()) // SIGKILL: no cleanup, no last ack
	killed := time.Now()
	<-child.exited
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

// TestSIGSTOPOfTheActiveRelay freezes the active relay's process in the
// middle of a batch, its sockets open, as a long pause of the runtime, a
// paused container or a stuck VM would. The database ends its silent
// session, a standby relays within 10s of the freeze, and when
// the frozen process wakes, its acknowledgement is refused and counted as
// sent again: every message arrives, first copies in order per key.
func TestSIGSTOPOfTheActiveRelay(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	hold := filepath.Join(t.TempDir(), "release")
	child := startRelayChild(t, b, brokers, childHoldEnv+"="+hold)

	const keys, seqs = 4, 5
	var msgs []*message.Message
	for seq := 1; seq <= seqs; seq++ {
		for k := range keys {
			msgs = append(msgs, event(fmt.Sprintf("purchase-%d", k), seq))
		}
	}
	b.publish(t, msgs[:keys]...)
	waitFor(t, "the child to hold its first send", func() bool { return len(child.out.Records(t, holdingSend)) > 0 })
	standby := prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers, LockRetryInterval: time.Second}, standby)
	require.Zero(t, metricValue(t, standby, "pin_outbox_relay_active"), "the child holds the lock")

	require.NoError(t, child.proc.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	require.NoError(t, os.WriteFile(hold, nil, 0o600)) // it goes on sending when it wakes
	b.publish(t, msgs[keys:]...)
	waitFor(t, "the standby to relay", func() bool { return metricValue(t, standby, "pin_outbox_published_total") > 0 })
	takeover := time.Since(frozen)
	t.Logf("the standby relayed %v after the SIGSTOP", takeover)
	require.Less(t, takeover, 10*time.Second)
	c := newConsumer(t, brokers)
	c.untilDistinct(t, len(msgs))

	require.NoError(t, child.proc.Signal(syscall.SIGCONT))
	var resent float64
	testbed.Eventually(t, func() error {
		if recs := child.out.Records(t, "outbox acknowledgement failed after publishing"); len(recs) > 0 {
			resent = recs[0]["sent_again"].(float64)
			t.Logf("the woken child could not acknowledge %v sends: %v", resent, recs[0]["err"])
			return nil
		}
		return fmt.Errorf("the woken child has not reported its refused acknowledgement")
	})
	seen := requireOrderedPerKey(t, c.until(t, len(msgs)+int(resent)))
	require.Len(t, seen, len(msgs), "nothing lost")
	c.quiet(t, time.Second)
	require.Len(t, c.records, len(msgs)+int(resent), "the duplicates are the ones the child counted")
	require.Equal(t, 1.0, metricValue(t, standby, "pin_outbox_relay_active"), "the standby keeps the lead")
}
