// Package expireslo_test holds the expiry's SLO test, which runs a relay and
// its Sarama producer inside a testing/synctest bubble. It is alone in its
// package, so alone in its test binary: Sarama keeps the reply channels of
// its sync producer in a process-wide sync.Pool, and a channel made inside
// the bubble, taken from the pool by the relay of a test running beside it,
// stops the whole binary ("receive on synctest channel from outside
// bubble"). No other test of this package may start a Sarama producer.
package expireslo_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/outbox/outboxtest"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestExpiredEventReachesKafkaWithinOneInterval is the design document's
// SLO row end to end: purchases with EndsAt = T, the expiry runner at its
// default interval and the outbox relay at its default poll interval,
// publishing to a Kafka-protocol broker; the Expired event is on the topic,
// read back by a Kafka client, by T + Interval + the relay's poll interval,
// and not before T.
//
// Time is the synctest bubble's: it moves only when every goroutine of the
// bubble waits on a timer, never while one waits on PostgreSQL or the
// broker, so a cycle and a publish take no time and two minutes of the
// schedule pass in seconds. The database pool, the runner, the relay and its
// Sarama producer live in the bubble; the broker and the reading client live
// outside it and are reached over the network.
//
// Two phases of EndsAt against the runner's grid: halfway between two ticks,
// and one microsecond after a tick (the worst case: the next tick is almost
// a whole interval later, and the relay may then be in its full pause).
func TestExpiredEventReachesKafkaWithinOneInterval(t *testing.T) {
	t.Parallel()
	var (
		interval = config.Defaults().ExpireInterval
		relayGap = config.Defaults().OutboxPollInterval
		bound    = interval + relayGap
	)
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	topic := newTopicReader(t, brokers, contract.Topic)

	synctest.Test(t, func(t *testing.T) {
		// The bubble's own pool: its connections and timers must belong to it.
		gdb, err := postgres.Open(context.Background(), db.URL)
		require.NoError(t, err)
		sqlDB, err := gdb.DB()
		require.NoError(t, err)
		t.Cleanup(func() { _ = sqlDB.Close() }) // after the runners stop
		bubbleDB := &testbed.Database{URL: db.URL, SQL: sqlDB, Gorm: gdb, Name: db.Name}

		start := time.Now() // the runner's first cycle; its ticks follow every interval
		pkg := promotiontest.InsertPackage(t, bubbleDB, promotiontest.Package{
			Code: "slo-week", Name: "SLO test", Kind: domain.PackageKindProjectBoost,
			DurationDays: 7, BoostWeight: 10, Price: decimal.NewFromInt(1500),
		})
		type purchase struct {
			phase  string
			id     uuid.UUID
			endsAt time.Time
		}
		purchases := []purchase{
			{phase: "halfway between ticks", endsAt: start.Add(interval / 2)},
			{phase: "just after a tick", endsAt: start.Add(interval + time.Microsecond)},
		}
		for i := range purchases {
			purchases[i].id = promotiontest.InsertPurchases(t, bubbleDB, pkg, 1, promotiontest.Purchases{
				EndsAt: purchases[i].endsAt, CreatedAt: purchases[i].endsAt.Add(-7 * 24 * time.Hour),
			})[0]
		}

		module, err := promotion.New(promotion.Deps{
			DB: gdb, Outbox: promotiontest.Publisher(t, nil), Logger: slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err)
		outboxtest.StartRelay(t, sqlDB, outboxtest.Relay{Brokers: brokers, Topics: module.OutboxTopics(), PollInterval: relayGap})
		testbed.StartRunner(t, moduleRunner(t, module, expiry.ExpireRunnerName))

		// What the topic holds just before each EndsAt, and at EndsAt + bound.
		type check struct {
			at       time.Time
			p        purchase
			expected bool
		}
		var checks []check
		for _, p := range purchases {
			checks = append(checks, check{at: p.endsAt.Add(-time.Millisecond), p: p}, check{at: p.endsAt.Add(bound), p: p, expected: true})
		}
		slices.SortFunc(checks, func(a, b check) int { return a.at.Compare(b.at) })
		for _, c := range checks {
			time.Sleep(time.Until(c.at))
			records, err := topic.read()
			require.NoError(t, err)
			expired := expiredRecord(t, records, c.p.id)
			if !c.expected {
				require.Nil(t, expired, "%s: the Expired event is on Kafka before EndsAt", c.p.phase)
				continue
			}
			require.NotNil(t, expired, "%s: no Expired event on Kafka by EndsAt + %s (EndsAt at %s of the runner's grid)",
				c.p.phase, bound, c.p.endsAt.Sub(start))
			// Sarama stamps a record when the relay hands it over: the bubble's time.
			t.Logf("%s: EndsAt -> sent %s (interval %s, relay poll %s)", c.p.phase, expired.Timestamp.Sub(c.p.endsAt), interval, relayGap)
		}
	})
}

// expiredRecord is the Expired event of purchase among records, nil when
// there is none.
func expiredRecord(tb testing.TB, records []*kgo.Record, purchase uuid.UUID) *kgo.Record {
	tb.Helper()
	for _, r := range records {
		if string(r.Key) != purchase.String() {
			continue
		}
		env, err := contract.Decode(r.Value, nil)
		require.NoError(tb, err)
		if env.Payload.Status == contract.StatusExpired {
			return r
		}
	}
	return nil
}

// moduleRunner is the module's runner called name.
func moduleRunner(tb testing.TB, m *promotion.Module, name string) host.Runner {
	tb.Helper()
	for _, r := range m.Runners() {
		if r.Name() == name {
			return r
		}
	}
	tb.Fatalf("the module has no runner %q", name)
	return nil
}

// topicReader reads a topic from outside a synctest bubble on behalf of
// code inside it: read blocks the caller on channels made outside the
// bubble, so the bubble's time stands still while the broker is asked.
type topicReader struct {
	requests chan struct{}
	replies  chan topicRead
}

type topicRead struct {
	records []*kgo.Record
	err     error
}

// newTopicReader consumes topic on brokers from its start until tb ends.
func newTopicReader(tb testing.TB, brokers []string, topic string) *topicReader {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(tb, err)
	tb.Cleanup(cl.Close)
	r := &topicReader{requests: make(chan struct{}), replies: make(chan topicRead)}
	done := make(chan struct{})
	tb.Cleanup(func() { close(r.requests); <-done })
	go func() {
		defer close(done)
		var records []*kgo.Record
		next := map[int32]int64{} // per partition, the offset after the last record read
		for range r.requests {
			err := catchUp(cl, topic, func(rec *kgo.Record) {
				records = append(records, rec)
				next[rec.Partition] = rec.Offset + 1
			}, next)
			r.replies <- topicRead{records: slices.Clone(records), err: err}
		}
	}()
	return r
}

// read returns every record of the topic up to its current end offsets.
func (r *topicReader) read() ([]*kgo.Record, error) {
	r.requests <- struct{}{}
	got := <-r.replies
	return got.records, got.err
}

// catchUp polls cl, handing each record to add, until next (kept up to date
// by add) reaches the end offsets the broker reports now.
func catchUp(cl *kgo.Client, topic string, add func(*kgo.Record), next map[int32]int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	for {
		behind := false
		ends.Each(func(o kadm.ListedOffset) { behind = behind || next[o.Partition] < o.Offset })
		if !behind {
			return nil
		}
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%s not read up to its end offsets: %w", topic, ctx.Err())
		}
		fetches.EachRecord(add)
	}
}
