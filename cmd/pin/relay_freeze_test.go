package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// freezeBound is the relay's promise: a relay leader that stops answering
// while its sockets stay open is replaced within 10 s.
const freezeBound = 10 * time.Second

// TestFrozenRelayLeaderIsReplaced freezes (SIGSTOP) the `pin serve` whose
// relay is active for 20 s, as the fault was first measured, while purchases and
// cancellations go through a second instance. An event committed during the
// freeze is on the topic within 10 s of its commit; after SIGCONT the woken
// instance stands by, and every event is on the topic with its purchase's
// versions in order once a consumer's version guard dropped the stale
// copies.
func TestFrozenRelayLeaderIsReplaced(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	brokers := testbed.NewKafka(t, contract.Topic)
	env := func() []string {
		return []string{
			"PIN_DATABASE_URL=" + db.URL,
			"PIN_HTTP_ADDR=" + testbed.FreeAddr(t),
			"PIN_KAFKA_BROKERS=" + brokers[0],
			"PIN_AUTH_JWT_SECRET=" + jwtSecret,
			"PIN_BOOST_PROJECTION=off",
		}
	}
	const active = `pin_outbox_relay_active{topic="` + contract.Topic + `"}`
	leader := startServer(t, env(), "serve")
	testbed.Eventually(t, func() error {
		if metricValue(t, leader, active) != 1 {
			return fmt.Errorf("the first instance is not the active relay yet")
		}
		return nil
	})
	standby := startServer(t, env(), "serve")
	require.Zero(t, metricValue(t, standby, active), "the first instance holds the lock")
	tok := token(t, uuid.New())
	code, created := standby.do(t, http.MethodPost, "/api/admin/v1/promotion-packages", token(t, uuid.New(), "admin"), map[string]any{
		"code": "freeze-test", "name": "freeze test", "kind": "ProjectBoost", "durationDays": 7, "boostWeight": 3,
		"price": map[string]any{"amount": 10, "currencyId": 643},
	})
	require.Equal(t, http.StatusCreated, code, "%v", created)
	pkg := created["id"].(string)
	reader := newTopicReader(t, brokers)

	// Traffic through the standby's API from before the freeze to after it,
	// so that the leader may well be frozen in the middle of a batch.
	traffic := startTraffic(standby.base, tok, pkg)
	for range 20 {
		standby.purchaseProject(t, tok, pkg, uuid.NewString())
	}

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	t.Cleanup(func() { _ = leader.cmd.Process.Signal(syscall.SIGCONT) }) // before startServer's kill
	committed := time.Now()                                              // the commit comes later still
	probe := standby.purchaseProject(t, tok, pkg, uuid.NewString())
	reader.awaitKey(t, probe, committed.Add(freezeBound))
	t.Logf("the event committed %v into the freeze reached Kafka %v after its commit",
		committed.Sub(frozen).Round(time.Millisecond), time.Since(committed).Round(time.Millisecond))
	require.Equal(t, 1.0, metricValue(t, standby, active), "the standby is the active relay")

	time.Sleep(time.Until(frozen.Add(20 * time.Second))) // the rest of the 20 s freeze, under traffic
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGCONT))
	for range 20 {
		standby.purchaseProject(t, tok, pkg, uuid.NewString())
	}
	testbed.Eventually(t, func() error {
		if a, b := metricValue(t, leader, active), metricValue(t, standby, active); a != 0 || b != 1 {
			return fmt.Errorf("active relay: woken instance %v, standby %v", a, b)
		}
		return nil
	})
	written := traffic.stop(t)
	t.Logf("%d purchases and cancellations in the background", written)

	// Every event in the outbox, per purchase in version order.
	rows, err := db.SQL.Query(`SELECT uuid, payload->>'aggregateId', (payload->'payload'->>'version')::bigint
		FROM outbox.pin_promotion_purchase_changed_v1 ORDER BY "offset"`)
	require.NoError(t, err)
	want := map[string][]int64{}
	ids := map[string]bool{}
	for rows.Next() {
		var id, key string
		var version int64
		require.NoError(t, rows.Scan(&id, &key, &version))
		want[key] = append(want[key], version)
		ids[id] = true
	}
	require.NoError(t, rows.Err())
	records := reader.awaitMessages(t, ids)

	// What a consumer applies: per key, only versions above the last applied.
	applied := map[string][]int64{}
	for _, r := range records {
		var env struct {
			AggregateID string `json:"aggregateId"`
			Payload     struct {
				Version int64 `json:"version"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(r.Value, &env))
		require.Equal(t, env.AggregateID, string(r.Key))
		if a := applied[env.AggregateID]; len(a) == 0 || env.Payload.Version > a[len(a)-1] {
			applied[env.AggregateID] = append(a, env.Payload.Version)
		}
	}
	require.Equal(t, want, applied, "every version of every purchase applied, in order")
	t.Logf("%d events, %d records on the topic: %d duplicates; the woken instance counted %v sends it could not acknowledge",
		len(ids), len(records), len(records)-len(ids), metricValue(t, leader, "pin_outbox_unacknowledged_sends_total"))
}

// topicReader reads the topic from its start, across calls.
type topicReader struct {
	client  *kgo.Client
	records []*kgo.Record
}

func newTopicReader(t *testing.T, brokers []string) *topicReader {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	return &topicReader{client: client}
}

// readUntil polls until done holds, and fails t once deadline has passed.
func (r *topicReader) readUntil(t *testing.T, deadline time.Time, what string, done func() bool) {
	t.Helper()
	for !done() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fetches := r.client.PollFetches(ctx)
		cancel()
		r.records = append(r.records, fetches.Records()...)
		if !done() && !time.Now().Before(deadline) {
			t.Fatalf("%s: not on the topic by the deadline (%d records read)", what, len(r.records))
		}
	}
}

// awaitKey reads until a record keyed key arrived, by deadline.
func (r *topicReader) awaitKey(t *testing.T, key string, deadline time.Time) {
	t.Helper()
	r.readUntil(t, deadline, "purchase "+key, func() bool {
		for _, rec := range r.records {
			if string(rec.Key) == key {
				return true
			}
		}
		return false
	})
}

// awaitMessages reads until every message id in ids arrived and returns
// all the records read, duplicates included.
func (r *topicReader) awaitMessages(t *testing.T, ids map[string]bool) []*kgo.Record {
	t.Helper()
	r.readUntil(t, time.Now().Add(testbed.ForwardDeadline), "every outbox event", func() bool {
		seen := map[string]bool{}
		for _, rec := range r.records {
			for _, h := range rec.Headers {
				if h.Key == contract.HeaderMessageID && ids[string(h.Value)] {
					seen[string(h.Value)] = true
				}
			}
		}
		return len(seen) == len(ids)
	})
	return r.records
}

// traffic buys and cancels through the API in the background until stopped.
type traffic struct {
	stopped chan struct{}
	done    chan struct{}
	written int
	err     error
}

func startTraffic(base, tok, pkg string) *traffic {
	tr := &traffic{stopped: make(chan struct{}), done: make(chan struct{})}
	post := func(path string, body any, want int) (map[string]any, error) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != want {
			return nil, fmt.Errorf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
		}
		return out, nil
	}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.stopped:
				return
			case <-time.After(20 * time.Millisecond):
			}
			purchase, err := post("/api/developers/v1/promotions", map[string]any{"packageId": pkg,
				"targets": []map[string]any{{"targetKind": "Project", "targetId": uuid.NewString()}}}, http.StatusCreated)
			if err == nil && i%2 == 0 {
				tr.written++
				_, err = post("/api/developers/v1/promotions/"+purchase["id"].(string)+"/cancel", map[string]any{"reason": "test"}, http.StatusOK)
			}
			if err != nil {
				tr.err = err
				return
			}
			tr.written++
		}
	}()
	return tr
}

// stop ends the traffic and returns how many events it caused.
func (tr *traffic) stop(t *testing.T) int {
	t.Helper()
	close(tr.stopped)
	<-tr.done
	require.NoError(t, tr.err)
	return tr.written
}
