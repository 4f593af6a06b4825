package promotion_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/outbox/outboxtest"
	"github.com/pinmarket/pin/platform/testbed"
)

// Span names the trace of a change goes through, from its cause to Kafka.
const (
	purchaseSpanName = http.MethodPost + " " + purchasesPath // otelhttp: method and route template
	cycleSpanName    = "expire-promotions.cycle"
	publishSpanName  = "outbox publish " + contract.Topic
	forwardSpanName  = "outbox forward " + contract.Topic
	relaySpanName    = "outbox relay " + contract.Topic
	projectSpanName  = "consumer " + boost.Name + " process " + contract.Topic
)

// tracedBundle is the module wired as `pin serve` wires it — HTTP server,
// outbox publisher and, when asked, the relay to a kfake broker — all
// tracing into one in-memory exporter and measuring into one registry.
type tracedBundle struct {
	*testBundle
	tp       trace.TracerProvider
	brokers  []string
	spans    *tracetest.InMemoryExporter
	reg      *prometheus.Registry
	consumer *kgo.Client
	records  []*kgo.Record
}

func newTracedBundle(tb testing.TB, forward bool) *tracedBundle {
	tb.Helper()
	spans := tracetest.NewInMemoryExporter()
	// A syncer exports each span as it ends, so the test sees it at once.
	tp := promotiontest.TracerProvider(tb, sdktrace.WithSyncer(spans))
	reg := prometheus.NewRegistry()
	b := &tracedBundle{
		testBundle: newWiredBundle(tb, wiring{registerer: reg, tp: tp}),
		tp:         tp,
		spans:      spans,
		reg:        reg,
	}
	if !forward {
		return b
	}

	b.brokers = testbed.NewKafka(tb, contract.Topic)
	outboxtest.StartRelay(tb, b.db.SQL, outboxtest.Relay{
		Brokers: b.brokers, Topics: []string{contract.Topic}, Registerer: reg, TracerProvider: tp,
	})
	var err error
	b.consumer, err = kgo.NewClient(
		kgo.SeedBrokers(b.brokers...),
		kgo.ConsumeTopics(contract.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	require.NoError(tb, err)
	tb.Cleanup(b.consumer.Close)
	return b
}

// project runs the reference boost projection (a test-only use of another
// module: the modules meet through the contract in the code that ships) on
// the bundle's topic, traced into its exporter.
func (b *tracedBundle) project(tb testing.TB) {
	tb.Helper()
	m, err := boost.New(boost.Deps{
		DB: b.db.Gorm, Authenticate: testbed.AuthenticateTenantHeader(), Brokers: b.brokers,
		Logger: slog.New(slog.DiscardHandler), Registerer: b.reg, TracerProvider: b.tp,
	})
	require.NoError(tb, err)
	testbed.StartRunner(tb, m.Runners()[0])
}

// statementUnder waits for the database span under ancestor whose
// statement contains text, and returns it.
func (b *tracedBundle) statementUnder(tb testing.TB, ancestor tracetest.SpanStub, text string) tracetest.SpanStub {
	tb.Helper()
	s := b.span(tb, "a statement with "+text+" in the trace of "+ancestor.Name, func(s tracetest.SpanStub) bool {
		return s.SpanContext.TraceID() == ancestor.SpanContext.TraceID() && strings.HasPrefix(s.Name, "query ") &&
			strings.Contains(stubAttr(s, "db.query.text"), text)
	})
	b.requireDescendant(tb, s, ancestor)
	require.Equal(tb, trace.SpanKindClient, s.SpanKind)
	return s
}

// record consumes the topic until the event of purchaseID with status
// arrives, and returns its record.
func (b *tracedBundle) record(tb testing.TB, purchaseID string, status contract.Status) *kgo.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbed.ForwardDeadline)
	defer cancel()
	for {
		for _, r := range b.records {
			if string(r.Key) != purchaseID {
				continue
			}
			env, err := contract.Decode(r.Value, nil)
			require.NoError(tb, err)
			if env.Payload.Status == status {
				return r
			}
		}
		fetches := b.consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("no %s event of purchase %s reached Kafka (%d records read)", status, purchaseID, len(b.records))
		}
		b.records = append(b.records, fetches.Records()...)
	}
}

// span waits for the one ended span that matches, and returns it. A span
// ends after the work it covers (the forward span after the broker's
// acknowledgement, which a consumer may see first), so it is polled for.
func (b *tracedBundle) span(tb testing.TB, what string, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	tb.Helper()
	var found []tracetest.SpanStub
	testbed.Eventually(tb, func() error {
		found = nil
		for _, s := range b.spans.GetSpans() {
			if match(s) {
				found = append(found, s)
			}
		}
		require.LessOrEqual(tb, len(found), 1, "more than one span is %s", what)
		if len(found) == 0 {
			return fmt.Errorf("no span is %s", what)
		}
		return nil
	})
	return found[0]
}

// requireDescendant checks that s lies under ancestor in the recorded tree:
// its parent chain, followed through the recorded spans, reaches ancestor.
func (b *tracedBundle) requireDescendant(tb testing.TB, s, ancestor tracetest.SpanStub) {
	tb.Helper()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, r := range b.spans.GetSpans() {
		byID[r.SpanContext.SpanID()] = r
	}
	chain := []string{s.Name}
	for cur := s; cur.Parent.IsValid(); {
		require.Equal(tb, ancestor.SpanContext.TraceID(), cur.Parent.TraceID(), "parent of %q is in another trace", cur.Name)
		if cur.Parent.SpanID() == ancestor.SpanContext.SpanID() {
			return
		}
		next, ok := byID[cur.Parent.SpanID()]
		require.True(tb, ok, "parent of %q was not recorded (chain %v)", cur.Name, chain)
		cur = next
		chain = append(chain, cur.Name)
	}
	tb.Fatalf("%q is not under %q (chain %v)", s.Name, ancestor.Name, chain)
}

// requireCarriedTo checks the last two legs of a change's trace: the
// outbox publication under cause, and the forward span of the record as
// its child. It returns the trace context of the record's traceparent.
func (b *tracedBundle) requireCarriedTo(tb testing.TB, cause tracetest.SpanStub, rec *kgo.Record) trace.SpanContext {
	tb.Helper()
	h := recordHeaders(rec)
	carried := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": h["traceparent"]}))
	require.True(tb, carried.IsValid(), "the record has a traceparent header: %v", h)
	require.Equal(tb, cause.SpanContext.TraceID(), carried.TraceID(),
		"the record's traceparent is in the trace of %q", cause.Name)

	publish := b.span(tb, "the publication in the trace", func(s tracetest.SpanStub) bool {
		return s.Name == publishSpanName && s.SpanContext.TraceID() == cause.SpanContext.TraceID()
	})
	b.requireDescendant(tb, publish, cause)
	require.Equal(tb, trace.SpanKindProducer, publish.SpanKind)
	require.Equal(tb, publish.SpanContext.SpanID(), carried.SpanID(), "the traceparent is the publication's span")

	forward := b.span(tb, "the forward of message "+h["message_id"], func(s tracetest.SpanStub) bool {
		return s.Name == forwardSpanName && stubAttr(s, "messaging.message.id") == h["message_id"]
	})
	require.Equal(tb, cause.SpanContext.TraceID(), forward.SpanContext.TraceID(), "the forward continues the trace")
	require.Equal(tb, publish.SpanContext.SpanID(), forward.Parent.SpanID(), "the forward is a child of the publication")
	require.Equal(tb, trace.SpanKindProducer, forward.SpanKind)
	require.Equal(tb, "kafka", stubAttr(forward, "messaging.system"))
	require.Equal(tb, contract.Topic, stubAttr(forward, "messaging.destination.name"))
	require.Equal(tb, codes.Unset, forward.Status.Code)
	return carried
}

// TestTracePurchaseReachesTheKafkaHeader follows a purchase from the HTTP
// request to the Kafka record: one trace, HTTP server span → outbox
// publication → forward, and the record's traceparent in that trace.
func TestTracePurchaseReachesTheKafkaHeader(t *testing.T) {
	t.Parallel()
	b := newTracedBundle(t, true)
	pkg := b.createPackage(t, "trace-project-week", "ProjectBoost")

	res := b.do(t, request{
		method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, uuid.New()),
		body: purchaseBody(pkg.ID, "Project", uuid.New()),
	})
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var p purchaseJSON
	res.decode(t, &p)

	rec := b.record(t, p.ID, contract.StatusActive)
	httpSpan := b.span(t, "the purchase's HTTP span", func(s tracetest.SpanStub) bool {
		return s.Name == purchaseSpanName
	})
	require.Equal(t, trace.SpanKindServer, httpSpan.SpanKind)
	require.False(t, httpSpan.Parent.IsValid(), "the request came without a trace: the HTTP span is the root")
	require.Equal(t, purchasesPath, stubAttr(httpSpan, "http.route"))
	require.Equal(t, int64(http.StatusCreated), stubAttrInt(httpSpan, "http.response.status_code"))

	carried := b.requireCarriedTo(t, httpSpan, rec)
	require.Equal(t, httpSpan.SpanContext.TraceID(), carried.TraceID(),
		"the Kafka header carries the purchase request's trace id")
	require.Equal(t, res.header.Get(echo.HeaderXRequestID), recordHeaders(rec)["correlation_id"],
		"the correlation id is the request id")
}

// TestTracePurchaseReachesTheProjection follows one purchase through the
// whole pipeline in one trace: the HTTP request and its statements, the
// outbox publication, the relay's forward, Kafka, the boost consumer's batch
// and the projection's write. No statement's span holds a value of the
// purchase.
func TestTracePurchaseReachesTheProjection(t *testing.T) {
	t.Parallel()
	b := newTracedBundle(t, true)
	b.project(t)
	pkg := b.createPackage(t, "trace-projection-week", "ProjectBoost")
	tenant, target := uuid.New(), uuid.New()

	res := b.do(t, request{
		method: http.MethodPost, path: purchasesPath, token: b.tenantToken(t, tenant),
		body: purchaseBody(pkg.ID, "Project", target),
	})
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var p purchaseJSON
	res.decode(t, &p)

	httpSpan := b.span(t, "the purchase's HTTP span", func(s tracetest.SpanStub) bool { return s.Name == purchaseSpanName })
	b.statementUnder(t, httpSpan, "INSERT INTO promotion.promotion_purchases ")
	b.statementUnder(t, httpSpan, "commit")
	b.statementUnder(t, httpSpan, "SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM purchase))")
	carried := b.requireCarriedTo(t, httpSpan, b.record(t, p.ID, contract.StatusActive))

	// The only record on the topic is a batch of one: the consumer's span
	// is its child, and so in the request's trace.
	consume := b.span(t, "the projection's batch", func(s tracetest.SpanStub) bool { return s.Name == projectSpanName })
	b.requireDescendant(t, consume, httpSpan)
	require.Equal(t, carried.SpanID(), consume.Parent.SpanID(), "the batch is a child of the record's traceparent")
	require.Len(t, consume.Links, 1)
	require.Equal(t, carried.SpanID(), consume.Links[0].SpanContext.SpanID(), "and links to it")
	require.Equal(t, trace.SpanKindConsumer, consume.SpanKind)
	b.statementUnder(t, consume, "INSERT INTO consumer.inbox")
	b.statementUnder(t, consume, "INSERT INTO boost.purchase_targets")

	round := b.span(t, "the relay round that sent it", func(s tracetest.SpanStub) bool { return s.Name == relaySpanName })
	b.statementUnder(t, round, "acked")

	testbed.RequireNoValueInSpans(t, testbed.DatabaseSpans(b.spans.GetSpans().Snapshots()),
		p.ID, pkg.ID, tenant.String(), target.String())
}

// TestTraceExpiryCycleReachesTheKafkaHeader follows an expiry from the
// cycle to the Kafka record: the Expired record's traceparent is in the
// cycle's trace, and its correlation id is the cycle's run id.
func TestTraceExpiryCycleReachesTheKafkaHeader(t *testing.T) {
	t.Parallel()
	b := newTracedBundle(t, true)
	pkg := b.createPackage(t, "trace-expiry-week", "ProjectBoost")
	p := b.buy(t, b.tenantToken(t, uuid.New()), pkg.ID, 1)
	promotiontest.MakeDue(t, b.db, 24*time.Hour, uuid.MustParse(p.ID)) // a week that ended a day ago

	res, err := b.module.ExpireOnce(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, res.Expired)

	rec := b.record(t, p.ID, contract.StatusExpired)
	cycle := b.span(t, "the expiry cycle", func(s tracetest.SpanStub) bool { return s.Name == cycleSpanName })
	require.False(t, cycle.Parent.IsValid(), "a cycle starts its own trace")
	require.Equal(t, res.RunID.String(), stubAttr(cycle, "pin.run_id"))
	require.Equal(t, res.RunID.String(), recordHeaders(rec)["correlation_id"], "the correlation id is the run id")

	carried := b.requireCarriedTo(t, cycle, rec)
	require.Equal(t, cycle.SpanContext.TraceID(), carried.TraceID(),
		"the Kafka header carries the cycle's trace id")
	b.statementUnder(t, cycle, "UPDATE promotion.promotion_purchases ")

	// The purchase's own event went out under the HTTP request's trace, not
	// the cycle's.
	active := b.record(t, p.ID, contract.StatusActive)
	require.NotEqual(t, recordHeaders(active)["traceparent"], recordHeaders(rec)["traceparent"])
}

// uuidPattern finds a UUID anywhere in a label value.
var uuidPattern = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// TestHTTPMetricsLabelRouteTemplates goes through the module's real routes
// and checks that the HTTP metrics are labelled by route template, never by
// the path with its ids (one series per purchase would be unbounded).
func TestHTTPMetricsLabelRouteTemplates(t *testing.T) {
	t.Parallel()
	b := newTracedBundle(t, false)
	pkg := b.createPackage(t, "metric-project-week", "ProjectBoost")
	token := b.tenantToken(t, uuid.New())
	p := b.buy(t, token, pkg.ID, 1)
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: purchasePath(p.ID), token: token}).status)
	require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: purchasePath(uuid.NewString()), token: token}).status)

	families, err := b.reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{} // "route method status" -> requests
	routes := 0
	for _, f := range families {
		if f.GetName() != httpserver.MetricRequestsTotal && f.GetName() != httpserver.MetricRequestDuration {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			routes++
			require.NotRegexp(t, uuidPattern, labels["route"], "%s has a raw id in its route label", f.GetName())
			if f.GetName() == httpserver.MetricRequestsTotal {
				counts[labels["route"]+" "+labels["method"]+" "+labels["status"]] += m.GetCounter().GetValue()
			}
		}
	}
	require.Positive(t, routes)
	require.Equal(t, 1.0, counts[purchasesPath+" POST 201"], "%v", counts)
	require.Equal(t, 1.0, counts[purchasesPath+"/:purchaseId GET 200"], "%v", counts)
	require.Equal(t, 1.0, counts[purchasesPath+"/:purchaseId GET 404"], "%v", counts)
	require.Equal(t, 1.0, counts[adminPackagesPath+" POST 201"], "%v", counts)
}

func recordHeaders(r *kgo.Record) map[string]string {
	h := make(map[string]string, len(r.Headers))
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// stubAttr is the value of the attribute key on s as a string ("" if
// absent).
func stubAttr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// stubAttrInt is the integer attribute key on s (0 if absent).
func stubAttrInt(s tracetest.SpanStub, key attribute.Key) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.AsInt64()
		}
	}
	return 0
}
