package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// settleWithin is how soon after its last start a consumer killed again and
// again must consume again (docs/adr/0020-consumer-group-after-crashes.md).
const settleWithin = time.Minute

// TestBoostConsumerSettlesAfterTenKills SIGKILLs the consuming `pin serve`
// (PIN_BOOST_PROJECTION=on) ten times, 3 to 6 s after each start, while
// another instance takes purchases, then starts it once more: within a
// minute of that start its group's lag is zero and the projection equals
// the one computed from the topic. Before the group's timeouts were made
// consistent, each join gave up after Sarama's 10 s read timeout, left one
// more member in the group, and the group never settled.
func TestBoostConsumerSettlesAfterTenKills(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	env := func(projection string) []string { return serveEnv(t, db, brokers, "PIN_BOOST_PROJECTION="+projection) }
	api := startServer(t, env("off"), "serve")
	tok := token(t, uuid.New())
	admin := token(t, uuid.New(), "admin")
	code, pkg := api.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", admin, map[string]any{
		"code": "kill-storm", "name": "kill storm", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 3,
		"price": map[string]any{"amount": 10, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", pkg)

	projects := make([]string, 10)
	for i := range projects {
		projects[i] = uuid.NewString()
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var traffic error // the writer's, checked on the test's goroutine
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			id, err := api.tryPurchaseProject(tok, pkg["id"].(string), projects[i%len(projects)])
			if err == nil && i%3 == 0 {
				var code int
				var body map[string]any
				code, body, err = api.send(http.MethodPost, "/api/developers/v1/promotions/"+id+"/cancel", tok, map[string]any{"reason": "test"})
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("cancel: %d %v", code, body)
				}
			}
			if err != nil {
				traffic = err
				return
			}
		}
	})

	// The fault is the schedule: kills a few seconds apart land in every
	// phase of a join (before, while waiting, between join and sync). Each
	// restart is the same replica: the same configuration, the same port.
	consumerEnv := env("on")
	for i := range 10 {
		consumer := startServer(t, consumerEnv, "serve")
		<-time.After(time.Duration(3+i%4) * time.Second)
		require.NoError(t, consumer.cmd.Process.Signal(syscall.SIGKILL))
		<-consumer.waited
		consumer.waited <- nil // for the cleanup
	}
	last := startServer(t, consumerEnv, "serve")
	started := time.Now()
	stop.Store(true)
	wg.Wait()
	require.NoError(t, traffic)

	var lag int64
	var want, got []string
	testbed.EventuallyWithin(t, settleWithin, func() error {
		backlog, err := kafka.GroupBacklog(brokers, kafka.Security{}, "boost", contract.Topic)
		if err != nil {
			return err
		}
		if lag = backlog.Lag; lag != 0 {
			return fmt.Errorf("group boost: lag %d", lag)
		}
		want, got = projectionFromTopic(t, brokers), queryStrings(t, db, boostProjected)
		slices.Sort(got)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return fmt.Errorf("projection\n%v\ndiffers from the topic's\n%v", got, want)
		}
		return nil
	})
	t.Logf("the consumer settled %s after its last start", time.Since(started).Round(time.Second))
	require.Len(t, want, len(projects))
	require.Equal(t, queryStrings(t, db, boostFromPurchases), got, "the topic carries the database's state")
	require.Positive(t, metricValue(t, last, `pin_consumer_consumed_total{consumer="boost"}`), "the last consumer consumed")
}

// projectionFromTopic reads the whole topic and computes from it what the
// boost projection holds, in boostProjected's form: per target, the weight
// and the count of the purchases whose last event is Active.
func projectionFromTopic(t *testing.T, brokers []string) []string {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.ConsumerConfig("pin-test"))
	require.NoError(t, err)
	defer func() { _ = client.Close() }()
	reader, err := sarama.NewConsumerFromClient(client)
	require.NoError(t, err)
	defer func() { _ = reader.Close() }()
	partitions, err := client.Partitions(contract.Topic)
	require.NoError(t, err)
	last := map[uuid.UUID]contract.PurchaseChanged{}
	for _, p := range partitions {
		end, err := client.GetOffset(contract.Topic, p, sarama.OffsetNewest)
		require.NoError(t, err)
		if end == 0 {
			continue
		}
		pc, err := reader.ConsumePartition(contract.Topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
		for m := range pc.Messages() {
			e, err := contract.Decode(m.Value, nil)
			require.NoError(t, err)
			if e.Payload.Version > last[e.Payload.PurchaseID].Version {
				last[e.Payload.PurchaseID] = e.Payload
			}
			if m.Offset+1 >= end {
				break
			}
		}
		require.NoError(t, pc.Close())
	}
	type boost struct{ weight, count int }
	targets := map[string]boost{}
	for _, p := range last {
		if p.Status != contract.StatusActive {
			continue
		}
		for _, tg := range p.Targets {
			key := fmt.Sprintf("%s %s", tg.TargetKind, tg.TargetID)
			b := targets[key]
			targets[key] = boost{b.weight + p.BoostWeight, b.count + 1}
		}
	}
	out := make([]string, 0, len(targets))
	for key, b := range targets {
		out = append(out, fmt.Sprintf("%s %d %d", key, b.weight, b.count))
	}
	slices.Sort(out)
	return out
}

// TestStatusSaysNotConsumingWhileLagGrows: a record has waited five minutes
// for the boost group, which took nothing in that time (no consumer runs),
// and `pin status` says so in both forms.
func TestStatusSaysNotConsumingWhileLagGrows(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	require.NoError(t, err)
	defer func() { _ = producer.Close() }()
	written := time.Now().Add(-5 * time.Minute).Truncate(time.Millisecond)
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: contract.Topic, Key: sarama.StringEncoder(uuid.NewString()),
		Value: sarama.StringEncoder("{}"), Timestamp: written})
	require.NoError(t, err)

	env := []string{"PIN_DATABASE_URL=" + db.URL, "PIN_KAFKA_BROKERS=" + strings.Join(brokers, ",")}
	out, stderr, code := run(t, env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var s struct {
		Consumers []struct {
			Group           string     `json:"group"`
			Lag             *int       `json:"lag"`
			OldestWaitingAt *time.Time `json:"oldestWaitingAt"`
			NotConsuming    bool       `json:"notConsuming"`
		} `json:"consumers"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Len(t, s.Consumers, 1, out)
	c := s.Consumers[0]
	require.Equal(t, "boost", c.Group)
	require.Equal(t, 1, *c.Lag, out)
	require.NotNil(t, c.OldestWaitingAt, out)
	require.True(t, written.Equal(*c.OldestWaitingAt), "oldest waiting %s, written %s", c.OldestWaitingAt, written)
	require.True(t, c.NotConsuming, out)

	text, stderr, code := run(t, env, "status")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `consumer\s+boost: .*NOT CONSUMING while lag grows: lag 1, oldest waiting record written 5m[0-9]+s ago`, text)
}
