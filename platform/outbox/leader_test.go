package outbox_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// heldSends holds a relay's first send to Kafka until released, and closes
// held when it holds it: a relay stuck between reading a batch and
// acknowledging it.
type heldSends struct {
	once    sync.Once
	held    chan struct{}
	release func()
	gate    chan struct{}
}

func newHeldSends() *heldSends {
	gate := make(chan struct{})
	return &heldSends{held: make(chan struct{}), gate: gate, release: sync.OnceFunc(func() { close(gate) })}
}

// OnSend implements sarama.ProducerInterceptor.
func (h *heldSends) OnSend(*sarama.ProducerMessage) {
	h.once.Do(func() { close(h.held); <-h.gate })
}

func (h *heldSends) sarama() *sarama.Config {
	c := kafka.ProducerConfig("pin-outbox-relay")
	c.Producer.Interceptors = []sarama.ProducerInterceptor{h}
	return c
}

// TestAnExLeaderAcknowledgesNothing stops the active relay in the middle of
// a batch and ends its lock session, as the database does to a frozen
// process: a standby sends the batch and acknowledges it. When the
// ex-leader's sends go through, its acknowledgement is refused (it runs on
// the ended session) and counted as sent again; every message arrives, in
// order per key, and the duplicates are exactly the ones it counted.
func TestAnExLeaderAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	sends := newHeldSends()
	exLeader, standby := prometheus.NewRegistry(), prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers, Sarama: sends.sarama()}, exLeader)
	t.Cleanup(sends.release) // before the relay's stop: a failed test must not hang
	waitFor(t, "the first relay to lead", func() bool { return metricValue(t, exLeader, "pin_outbox_relay_active") == 1 })
	b.startRelay(t, relay.Config{Brokers: brokers}, standby)

	var msgs []*message.Message
	for seq := 1; seq <= 3; seq++ {
		for k := range 3 {
			msgs = append(msgs, event(fmt.Sprintf("purchase-%d", k), seq))
		}
	}
	b.publish(t, msgs...)
	<-sends.held
	runbook, err := os.ReadFile(outboxRunbook)
	require.NoError(t, err)
	holder := strings.TrimSuffix(sqlAfter(t, string(runbook), "### 2. Is a relay active?"), ";")
	_, err = b.db.SQL.Exec(`SELECT pg_terminate_backend(pid) FROM (` + holder + `) h`)
	require.NoError(t, err)

	c := newConsumer(t, brokers)
	c.untilDistinct(t, len(msgs))
	require.Equal(t, 1.0, metricValue(t, standby, "pin_outbox_relay_active"))
	waitFor(t, "the standby to acknowledge the batch", func() bool { backlog, _, _ := b.stats(t); return backlog == 0 })

	sends.release() // the ex-leader wakes up in the middle of its batch
	waitFor(t, "the ex-leader's refused acknowledgement", func() bool {
		return metricValue(t, exLeader, "pin_outbox_unacknowledged_sends_total") > 0 &&
			metricValue(t, exLeader, "pin_outbox_relay_active") == 0
	})
	resent := int(metricValue(t, exLeader, "pin_outbox_unacknowledged_sends_total"))
	require.Equal(t, 1.0, metricValue(t, standby, "pin_outbox_relay_active"), "the standby keeps the lead")
	records := c.until(t, len(msgs)+resent)
	seen := requireOrderedPerKey(t, records)
	require.Len(t, seen, len(msgs), "nothing lost")
	t.Logf("the ex-leader sent %d messages it could not acknowledge", resent)
	c.quiet(t, time.Second)
	require.Len(t, c.records, len(msgs)+resent, "the duplicates are the ones counted")
}

// TestASlowBrokerKeepsTheLead holds the active relay's send to Kafka for
// three times its SessionTimeout: its heartbeat keeps the lock session, so
// no standby takes over and nothing is sent twice.
func TestASlowBrokerKeepsTheLead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	const sessionTimeout = 2 * time.Second
	sends := newHeldSends()
	leader, standby := prometheus.NewRegistry(), prometheus.NewRegistry()
	b.startRelay(t, relay.Config{Brokers: brokers, Sarama: sends.sarama(), SessionTimeout: sessionTimeout}, leader)
	t.Cleanup(sends.release) // before the relay's stop: a failed test must not hang
	waitFor(t, "the first relay to lead", func() bool { return metricValue(t, leader, "pin_outbox_relay_active") == 1 })
	b.startRelay(t, relay.Config{Brokers: brokers, SessionTimeout: sessionTimeout}, standby)

	b.publish(t, event("purchase-1", 1), event("purchase-1", 2))
	<-sends.held
	for held := time.Now(); time.Since(held) < 3*sessionTimeout; time.Sleep(10 * time.Millisecond) {
		require.Zero(t, metricValue(t, standby, "pin_outbox_relay_active"), "a standby took over from a relay waiting for Kafka")
	}
	sends.release()
	c := newConsumer(t, brokers)
	requireOrderedPerKey(t, c.until(t, 2))
	waitFor(t, "the batch acknowledged", func() bool { backlog, _, _ := b.stats(t); return backlog == 0 })
	require.Equal(t, 1.0, metricValue(t, leader, "pin_outbox_relay_active"))
	require.Zero(t, metricValue(t, leader, "pin_outbox_unacknowledged_sends_total"))
	c.quiet(t, time.Second)
	require.Len(t, c.records, 2, "nothing sent twice")
}

// TestRelayRefusesSessionTimeoutsItCannotKeep checks the rules of
// SessionTimeout: a standby that tried less often would have its session
// ended between two tries, and below a second the idle timeouts would end
// live sessions.
func TestRelayRefusesSessionTimeoutsItCannotKeep(t *testing.T) {
	t.Parallel()
	db := setup(t).db.SQL
	for _, tc := range []struct {
		cfg  relay.Config
		want string
	}{
		{relay.Config{LockRetryInterval: 5 * time.Second}, "LockRetryInterval 5s must be shorter than SessionTimeout 5s"},
		{relay.Config{SessionTimeout: 500 * time.Millisecond, LockRetryInterval: 100 * time.Millisecond}, "SessionTimeout 500ms is below 1s"},
	} {
		tc.cfg.Brokers, tc.cfg.Topics, tc.cfg.PollInterval = []string{"127.0.0.1:1"}, []string{topic}, time.Second
		_, err := relay.New(db, tc.cfg, testLogger(), prometheus.NewRegistry(), noop.NewTracerProvider())
		require.ErrorContains(t, err, tc.want)
	}
}

// TestRelayRequiresAPollInterval: the relay has no poll interval of its
// own; PIN_OUTBOX_POLL_INTERVAL's default lives in platform/config.
func TestRelayRequiresAPollInterval(t *testing.T) {
	t.Parallel()
	db := setup(t).db.SQL
	_, err := relay.New(db, relay.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{topic}},
		testLogger(), prometheus.NewRegistry(), noop.NewTracerProvider())
	require.ErrorContains(t, err, "no PollInterval (PIN_OUTBOX_POLL_INTERVAL)")
}
