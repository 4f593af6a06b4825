package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/testbed"
)

// expireBundle is one expiry cycle on its own fresh database, with its
// logs, metrics and spans captured.
type expireBundle struct {
	ctx       context.Context
	db        *testbed.Database
	publisher *outbox.Publisher
	store     *ExpireRepository
	cycle     *app.ExpirePromotionsHandler
	logs      *expireLogBuffer
	reg       *prometheus.Registry
	spans     *tracetest.SpanRecorder
	pkg       packageModel
}

func newExpireBundle(tb testing.TB) *expireBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	logs := &expireLogBuffer{}
	logger := observability.NewLogger(logs, slog.LevelDebug)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	publisher, err := outbox.NewPublisher(logger, tp)
	require.NoError(tb, err)
	store, err := NewExpireRepository(db.Gorm, publisher)
	require.NoError(tb, err)
	reg := prometheus.NewRegistry()
	metrics, err := app.NewExpireMetrics(reg)
	require.NoError(tb, err)
	cycle, err := app.NewExpirePromotionsHandler(app.ExpireConfig{
		Store: store, Logger: logger, Metrics: metrics, TracerProvider: tp,
	})
	require.NoError(tb, err)
	b := &expireBundle{
		ctx: context.Background(), db: db, publisher: publisher, store: store, cycle: cycle,
		logs: logs, reg: reg, spans: spans,
	}
	b.pkg = b.insertPackage(tb)
	return b
}

// run runs one cycle with the given batch size and batch limit.
func (b *expireBundle) run(tb testing.TB, batchSize, maxBatches int) app.ExpireResult {
	tb.Helper()
	res, err := b.cycle.Handle(b.ctx, app.ExpirePromotions{BatchSize: batchSize, MaxBatchesPerCycle: maxBatches})
	require.NoError(tb, err)
	return res
}

// insertPackage stores a ProjectBoost package the test purchases refer to.
func (b *expireBundle) insertPackage(tb testing.TB) packageModel {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	m := packageModel{
		ID: uuid.New(), Code: "expire-test-" + strings.ToLower(uuid.NewString()[:8]), Name: "Expire test week",
		Kind: string(domain.PackageKindProjectBoost), DurationDays: 7, BoostWeight: 10,
		PriceAmount: decimal.RequireFromString("1500.00"), CurrencyID: domain.CurrencyIDRUB, IsActive: true,
		CreatedAt: now, UpdatedAt: now,
	}
	require.NoError(tb, b.db.Gorm.Create(&m).Error)
	return m
}

// purchaseSpec shapes the purchases insertPurchases makes.
type purchaseSpec struct {
	status  domain.Status
	targets int       // 1 when 0
	endsAt  time.Time // a week from now when zero
}

// insertPurchases stores n purchases with their targets through the GORM
// models, as a repository would (the use case's 1000 transactions are too
// slow for a backlog). Each runs a week: starts_at = ends_at - 7 days.
func (b *expireBundle) insertPurchases(tb testing.TB, n int, spec purchaseSpec) []uuid.UUID {
	tb.Helper()
	if spec.status == "" {
		spec.status = domain.StatusActive
	}
	if spec.targets == 0 {
		spec.targets = 1
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if spec.endsAt.IsZero() {
		spec.endsAt = now.Add(7 * 24 * time.Hour)
	}
	ids := make([]uuid.UUID, n)
	purchases := make([]purchaseModel, n)
	var targets []targetModel
	for i := range purchases {
		ids[i] = uuid.New()
		m := purchaseModel{
			ID: ids[i], TenantID: uuid.New(), PackageID: b.pkg.ID,
			PackageCode: b.pkg.Code, PackageKind: b.pkg.Kind, BoostWeight: b.pkg.BoostWeight,
			PriceAmount: b.pkg.PriceAmount, CurrencyID: b.pkg.CurrencyID,
			CurrencyIsoCode: domain.RUB.IsoCode, CurrencyName: domain.RUB.Name, CurrencySign: domain.RUB.Sign,
			Status: string(spec.status), PaymentStatus: string(domain.PaymentNotRequired),
			StartsAt: spec.endsAt.Add(-7 * 24 * time.Hour), EndsAt: spec.endsAt,
			CreatedByUserID: uuid.New(), CreatedAt: now, UpdatedAt: now, Version: 1,
		}
		switch spec.status {
		case domain.StatusCancelled:
			reason := "test"
			m.CancelReason = &reason
			m.Version = 2
		case domain.StatusExpired:
			m.Version = 2
		}
		purchases[i] = m
		for j := 0; j < spec.targets; j++ {
			targets = append(targets, targetModel{
				PurchaseID: ids[i], TargetKind: string(domain.TargetKindProject), TargetID: uuid.New(), Position: int16(j),
			})
		}
	}
	// Bulk inserts are slow by GORM's standard; keep its warning out.
	quiet := b.db.Gorm.Session(&gorm.Session{Logger: gormlogger.Discard})
	require.NoError(tb, quiet.CreateInBatches(&purchases, 500).Error)
	require.NoError(tb, quiet.CreateInBatches(&targets, 1000).Error)
	return ids
}

// makeDue moves the purchases' periods into the past together (the period
// keeps its length), so that they ended by ago before now.
func (b *expireBundle) makeDue(tb testing.TB, ago time.Duration, ids ...uuid.UUID) {
	tb.Helper()
	_, err := b.db.SQL.ExecContext(b.ctx, `UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - (ends_at - $2::timestamptz), ends_at = $2::timestamptz
		WHERE id = ANY($1::uuid[])`, uuidStrings(ids), time.Now().UTC().Add(-ago))
	require.NoError(tb, err)
}

// insertDue stores n Active purchases that ended an hour ago.
func (b *expireBundle) insertDue(tb testing.TB, n int) []uuid.UUID {
	tb.Helper()
	ids := b.insertPurchases(tb, n, purchaseSpec{})
	b.makeDue(tb, time.Hour, ids...)
	return ids
}

// purchaseRow is the stored state of a purchase.
type purchaseRow struct {
	Status    string
	Version   int64
	UpdatedAt time.Time
}

func (b *expireBundle) row(tb testing.TB, id uuid.UUID) purchaseRow {
	tb.Helper()
	var r purchaseRow
	require.NoError(tb, b.db.SQL.QueryRowContext(b.ctx,
		`SELECT status, version, updated_at FROM promotion.promotion_purchases WHERE id = $1`, id).
		Scan(&r.Status, &r.Version, &r.UpdatedAt))
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r
}

// statusCounts counts the purchases by status.
func (b *expireBundle) statusCounts(tb testing.TB) map[string]int {
	tb.Helper()
	rows, err := b.db.SQL.QueryContext(b.ctx, `SELECT status, count(*) FROM promotion.promotion_purchases GROUP BY status`)
	require.NoError(tb, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(tb, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(tb, rows.Err())
	return out
}

// storedEvent is an event as it sits in the outbox, decoded the way a
// consumer decodes it (contract.Decode).
type storedEvent struct {
	MessageID string
	Metadata  map[string]string
	Envelope  contract.Envelope
}

// events returns the events in the outbox, in insertion order.
func (b *expireBundle) events(tb testing.TB) []storedEvent {
	tb.Helper()
	rows, err := b.db.SQL.QueryContext(b.ctx,
		`SELECT payload FROM `+outbox.TableName(contract.Topic)+` ORDER BY transaction_id, "offset"`)
	require.NoError(tb, err)
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var raw []byte
		require.NoError(tb, rows.Scan(&raw))
		// The row holds watermill's forwarder envelope around our message.
		var fwd struct {
			DestinationTopic string            `json:"destination_topic"`
			UUID             string            `json:"uuid"`
			Payload          []byte            `json:"payload"`
			Metadata         map[string]string `json:"metadata"`
		}
		require.NoError(tb, json.Unmarshal(raw, &fwd))
		require.Equal(tb, contract.Topic, fwd.DestinationTopic)
		env, err := contract.Decode(fwd.Payload, slog.New(slog.NewTextHandler(io.Discard, nil)))
		require.NoError(tb, err)
		out = append(out, storedEvent{MessageID: fwd.UUID, Metadata: fwd.Metadata, Envelope: env})
	}
	require.NoError(tb, rows.Err())
	return out
}

// expiredEvents returns the outbox's events with status Expired by
// purchase id.
func (b *expireBundle) expiredEvents(tb testing.TB) map[uuid.UUID][]storedEvent {
	tb.Helper()
	out := map[uuid.UUID][]storedEvent{}
	for _, e := range b.events(tb) {
		if e.Envelope.Payload.Status == contract.StatusExpired {
			out[e.Envelope.AggregateID] = append(out[e.Envelope.AggregateID], e)
		}
	}
	return out
}

// exec runs statements on the test database.
func (b *expireBundle) exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		_, err := b.db.SQL.ExecContext(b.ctx, s)
		require.NoError(tb, err, s)
	}
}

// counter returns the value of a metric series from the registry.
func (b *expireBundle) metric(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	families, err := b.reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	tb.Fatalf("metric %s%v not found", name, labels)
	return 0
}

// expireLogBuffer collects JSON log lines; safe for concurrent writers.
type expireLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *expireLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the records whose msg is msg.
func (l *expireLogBuffer) lines(tb testing.TB, msg string) []map[string]any {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(tb, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// failOnceTrigger makes every UPDATE of purchase id raise an exception with
// the given SQLSTATE: a row error (P0001) or an infrastructure-like one.
func (b *expireBundle) failUpdatesOf(tb testing.TB, id uuid.UUID, sqlstate string) {
	tb.Helper()
	b.exec(tb, fmt.Sprintf(`CREATE OR REPLACE FUNCTION promotion.expire_test_fail() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id = '%s' THEN
		RAISE EXCEPTION 'expire test: update of %s refused' USING ERRCODE = '%s';
	END IF;
	RETURN NEW;
END $$`, id, id, sqlstate),
		`CREATE TRIGGER expire_test_fail BEFORE UPDATE ON promotion.promotion_purchases
		FOR EACH ROW EXECUTE FUNCTION promotion.expire_test_fail()`)
}
