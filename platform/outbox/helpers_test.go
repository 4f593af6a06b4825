package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

const topic = "pin.promotion.purchase-changed.v1"

type testBundle struct {
	ctx    context.Context
	db     *testbed.Database
	pub    *outbox.Publisher
	logger *slog.Logger
}

func setup(tb testing.TB) testBundle {
	tb.Helper()
	logger := testLogger()
	pub, err := outbox.NewPublisher(noop.NewTracerProvider())
	require.NoError(tb, err)
	return testBundle{ctx: context.Background(), db: testbed.NewDatabase(tb), pub: pub, logger: logger}
}

// testLogger is silent unless PIN_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("PIN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// event builds an outbox message for key with sequence number seq.
func event(key string, seq int) *message.Message {
	msg := message.NewMessage(uuid.NewString(), []byte(fmt.Sprintf(`{"key":%q,"seq":%d}`, key, seq)))
	msg.Metadata.Set(kafka.MetaPartitionKey, key)
	msg.Metadata.Set(kafka.MetaEventType, "pin.promotion.purchase-changed")
	msg.Metadata.Set(kafka.MetaContractVersion, "1")
	return msg
}

// publish stores msgs in one committed transaction.
func (b testBundle) publish(tb testing.TB, msgs ...*message.Message) {
	tb.Helper()
	require.NoError(tb, b.tryPublish(msgs...))
}

// tryPublish is publish for a writer goroutine, which must not stop the
// test: it returns the error for the goroutine to report.
func (b testBundle) tryPublish(msgs ...*message.Message) error {
	return postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		return publish(b.ctx, b.pub, tx, topic, msgs...)
	})
}

// startRelay runs a relay until the test ends (or stop is called).
func (b testBundle) startRelay(tb testing.TB, cfg relay.Config, reg prometheus.Registerer) (stop func()) {
	tb.Helper()
	return b.startTracedRelay(tb, cfg, reg, noop.NewTracerProvider())
}

// startTracedRelay is startRelay with the tracer provider tp.
func (b testBundle) startTracedRelay(tb testing.TB, cfg relay.Config, reg prometheus.Registerer, tp trace.TracerProvider) (stop func()) {
	tb.Helper()
	if cfg.Topics == nil {
		cfg.Topics = []string{topic}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.LockRetryInterval == 0 {
		cfg.LockRetryInterval = 100 * time.Millisecond
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	r, err := relay.New(b.db.SQL, cfg, b.logger, reg, tp)
	require.NoError(tb, err)
	require.Equal(tb, "outbox-relay", r.Name())
	return testbed.StartRunner(tb, r)
}

// consumer reads the topic from the start.
type consumer struct {
	cl      *kgo.Client
	records []*kgo.Record
}

func newConsumer(tb testing.TB, brokers []string) *consumer {
	tb.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	require.NoError(tb, err)
	tb.Cleanup(cl.Close)
	return &consumer{cl: cl}
}

// until polls until at least n records arrived in all, or fails tb after
// testbed.ForwardDeadline. It returns every record read so far.
func (c *consumer) until(tb testing.TB, n int) []*kgo.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	for len(c.records) < n {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("got %d of %d records before the deadline", len(c.records), n)
		}
		fetches.EachError(func(t string, p int32, err error) {
			tb.Logf("fetch %s/%d: %v", t, p, err)
		})
		c.records = append(c.records, fetches.Records()...)
	}
	return c.records
}

// untilDistinct reads until n distinct messages (by message_id) have
// arrived, redeliveries included in what it returns.
func (c *consumer) untilDistinct(tb testing.TB, n int) []*kgo.Record {
	tb.Helper()
	distinct := func() int {
		ids := map[string]bool{}
		for _, r := range c.records {
			ids[headers(r)["message_id"]] = true
		}
		return len(ids)
	}
	for distinct() < n {
		c.until(tb, len(c.records)+1)
	}
	return c.records
}

// quiet checks that no further record arrives within d.
func (c *consumer) quiet(tb testing.TB, d time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		fetches := c.cl.PollFetches(ctx)
		require.Empty(tb, fetches.Records(), "no more records expected")
	}
}

func headers(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// waitFor polls cond until it holds (testbed.Eventually).
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

func (b testBundle) stats(tb testing.TB) (backlog int64, age time.Duration, dead int64) {
	tb.Helper()
	backlog, age, dead, err := relay.Stats(b.ctx, b.db.SQL, topic)
	require.NoError(tb, err)
	return backlog, age, dead
}

// seqOf decodes the sequence number in a test event's value.
func seqOf(tb testing.TB, r *kgo.Record) (key string, seq int) {
	tb.Helper()
	_, err := fmt.Sscanf(string(r.Value), `{"key":%q,"seq":%d}`, &key, &seq)
	require.NoError(tb, err, string(r.Value))
	return key, seq
}

// requireOrderedPerKey checks that, per key, first deliveries come in
// increasing sequence and on one partition, and returns the distinct
// message ids.
func requireOrderedPerKey(tb testing.TB, records []*kgo.Record) map[string]int {
	tb.Helper()
	last := map[string]int{}
	partition := map[string]int32{}
	seen := map[string]int{}
	for _, r := range records {
		id := headers(r)["message_id"]
		seen[id]++
		key, seq := seqOf(tb, r)
		require.Equal(tb, key, string(r.Key))
		if p, ok := partition[key]; ok {
			require.Equal(tb, p, r.Partition, "key %s moved partition", key)
		}
		partition[key] = r.Partition
		if seen[id] > 1 {
			continue // a redelivery (at least once)
		}
		if prev, ok := last[key]; ok {
			require.Greater(tb, seq, prev, "key %s out of order", key)
		}
		last[key] = seq
	}
	return seen
}

func spanContextOf(ctx context.Context) trace.SpanContext {
	return trace.SpanContextFromContext(ctx)
}

// publish writes msgs to topic's outbox table inside tx, as a producer
// without a change of its own does.
func publish(ctx context.Context, pub *outbox.Publisher, tx postgres.Tx, topic string, msgs ...*message.Message) error {
	return pub.Write(ctx, tx, outbox.Events(topic, msgs...))
}

// strings is the one text column of query's rows, in order.
func (b testBundle) strings(tb testing.TB, query string, args ...any) []string {
	tb.Helper()
	rows, err := b.db.SQL.Query(query, args...)
	require.NoError(tb, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(tb, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(tb, rows.Err())
	return out
}
