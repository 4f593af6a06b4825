package boost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/testbed"
)

const jwtSecret = "0123456789abcdef0123456789abcdef"

// bundle is one test's world: a database, a broker with the topic, a
// producer of raw records and the boost module's HTTP route.
type bundle struct {
	db      *testbed.Database
	brokers []string
	client  *kgo.Client
	logs    *testbed.LogBuffer
	reg     *prometheus.Registry
	http    http.Handler
	token   string
	stop    func()
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{db: testbed.NewDatabase(t), brokers: testbed.NewKafka(t, contract.Topic)}
	// The default partitioner of kgo is Kafka's (murmur2 of the key), as the
	// outbox relay's: one purchase's records land on one partition.
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.DefaultProduceTopic(contract.Topic))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	b.client = client
	b.stop = b.start(t, b.db.Gorm)
	return b
}

// start runs the boost module's consumer on db until the test ends or stop
// is called; a fresh registry and log buffer replace the previous ones.
func (b *bundle) start(t testing.TB, db *gorm.DB) (stop func()) {
	t.Helper()
	b.logs = &testbed.LogBuffer{}
	b.reg = prometheus.NewRegistry()
	logger := observability.NewLogger(b.logs, slog.LevelDebug)
	authn, err := auth.NewAuthenticator([]byte(jwtSecret))
	require.NoError(t, err)
	m, err := boost.New(boost.Deps{DB: db, Authenticate: authn.Middleware(), Brokers: b.brokers, Logger: logger, Registerer: b.reg})
	require.NoError(t, err)
	e := httpserver.New(httpserver.Config{}, logger, prometheus.NewRegistry(), noop.NewTracerProvider())
	m.RegisterRoutes(e.Group(""))
	b.http = e
	b.token, err = authn.Issue(auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}, time.Hour)
	require.NoError(t, err)
	stopRunner := testbed.StartRunner(t, m.Runners()[0])
	logs := b.logs
	stop = func() {
		stopRunner()
		if t.Failed() {
			t.Logf("consumer logs:\n%s", logs.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

// purchase is a purchase as the producer would announce it.
type purchase struct {
	id      uuid.UUID
	weight  int
	targets []contract.Target
}

func newPurchase(weight int, targets ...contract.Target) purchase {
	return purchase{id: uuid.New(), weight: weight, targets: targets}
}

func project(id uuid.UUID) contract.Target {
	return contract.Target{TargetKind: contract.TargetProject, TargetID: id}
}

// envelope is the event of p in status at version.
func (p purchase) envelope(status contract.Status, version int64) contract.Envelope {
	start := time.Now().UTC().Add(-time.Hour)
	return contract.NewEnvelope(contract.PurchaseChanged{
		PurchaseID:    p.id,
		TenantID:      uuid.New(),
		PackageID:     uuid.New(),
		PackageCode:   "project-boost-week",
		PackageKind:   contract.KindProjectBoost,
		Targets:       p.targets,
		Status:        status,
		PaymentStatus: contract.PaymentNotRequired,
		BoostWeight:   p.weight,
		StartsAt:      start,
		EndsAt:        start.Add(7 * 24 * time.Hour),
		Price:         contract.Price{Amount: contract.NewAmount(decimal.NewFromInt(1500)), CurrencyID: contract.CurrencyIDRUB, Currency: contract.RUBCurrency()},
		Version:       version,
	}, uuid.New(), time.Now())
}

// record lays e out as the outbox relay does. The value is encoded without
// validation, so a test can send what a later producer might.
func record(tb testing.TB, e contract.Envelope) *kgo.Record {
	tb.Helper()
	value, err := json.Marshal(e)
	require.NoError(tb, err)
	return &kgo.Record{
		Key:   []byte(e.AggregateID.String()),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: contract.HeaderMessageID, Value: []byte(e.MessageID.String())},
			{Key: contract.HeaderEventType, Value: []byte(contract.EventType)},
			{Key: contract.HeaderContractVersion, Value: []byte("1")},
		},
	}
}

func (b *bundle) produce(tb testing.TB, records ...*kgo.Record) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(tb, b.client.ProduceSync(ctx, records...).FirstErr())
}

// boostOf reads the target's boost through the HTTP route.
func (b *bundle) boostOf(tb testing.TB, t contract.Target) (weight, active int) {
	tb.Helper()
	code, body := b.get(tb, "/api/developers/v1/promotion-boosts/"+string(t.TargetKind)+"/"+t.TargetID.String())
	require.Equal(tb, http.StatusOK, code, body)
	var resp struct {
		TargetKind      string `json:"targetKind"`
		TargetID        string `json:"targetId"`
		BoostWeight     int    `json:"boostWeight"`
		ActivePurchases int    `json:"activePurchases"`
	}
	require.NoError(tb, json.Unmarshal([]byte(body), &resp))
	require.Equal(tb, string(t.TargetKind), resp.TargetKind)
	require.Equal(tb, t.TargetID.String(), resp.TargetID)
	return resp.BoostWeight, resp.ActivePurchases
}

func (b *bundle) get(tb testing.TB, path string) (int, string) {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	rec := httptest.NewRecorder()
	b.http.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// requireBoost polls the route until the target shows weight and active.
func (b *bundle) requireBoost(tb testing.TB, t contract.Target, weight, active int) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		if w, a := b.boostOf(tb, t); w != weight || a != active {
			return fmt.Errorf("boost of %s: want %d/%d, have %d/%d", t.TargetID, weight, active, w, a)
		}
		return nil
	})
}

// counter is the value of a counter of the boost consumer.
func (b *bundle) counter(tb testing.TB, name string) float64 {
	tb.Helper()
	return testbed.Metric(tb, b.reg, name).GetCounter().GetValue()
}

// waitConsumed polls until the consumer acknowledged at least n records.
func (b *bundle) waitConsumed(tb testing.TB, n float64) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		if got := b.counter(tb, "pin_consumer_consumed_total"); got < n {
			return fmt.Errorf("consumed %v of %v records", got, n)
		}
		return nil
	})
}

// delaySamples is the sample count of the delay histogram.
func (b *bundle) delaySamples(tb testing.TB) uint64 {
	tb.Helper()
	return testbed.Metric(tb, b.reg, "pin_consumer_apply_delay_seconds").GetHistogram().GetSampleCount()
}

// logged reports whether a log record with msg carries every attr.
func (b *bundle) logged(tb testing.TB, msg string, attrs map[string]string) bool {
	tb.Helper()
	for _, rec := range b.logs.Records(tb, msg) {
		ok := true
		for k, v := range attrs {
			if got, _ := rec[k].(string); !strings.Contains(got, v) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// produceOnEveryPartition puts a copy of each of records on every partition
// of the topic, whatever their keys hash to, and returns the copies.
func (b *bundle) produceOnEveryPartition(tb testing.TB, records ...*kgo.Record) []*kgo.Record {
	tb.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.DefaultProduceTopic(contract.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(tb, err)
	defer client.Close()
	var copies []*kgo.Record
	for p := range int32(testbed.KafkaPartitions) {
		for _, r := range records {
			c := &kgo.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Headers: slices.Clone(r.Headers), Partition: p}
			copies = append(copies, c)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(tb, client.ProduceSync(ctx, copies...).FirstErr())
	return copies
}
