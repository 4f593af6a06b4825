package adapters

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
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
	batches   *expiry.ExpireBatches
	cycle     *expiry.ExpireCycle
	logs      *promotiontest.LogBuffer
	reg       *prometheus.Registry
	spans     *tracetest.SpanRecorder
	pkg       promotiontest.Package
}

func newExpireBundle(tb testing.TB) *expireBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	logs := &promotiontest.LogBuffer{}
	logger := observability.NewLogger(logs, slog.LevelDebug)
	spans := tracetest.NewSpanRecorder()
	tp := promotiontest.TracerProvider(tb, sdktrace.WithSpanProcessor(spans))
	publisher := promotiontest.Publisher(tb, tp)
	store, err := NewExpireRepository(db.Gorm, publisher)
	require.NoError(tb, err)
	reg := prometheus.NewRegistry()
	cycle := promotiontest.ExpireCycle(tb, promotiontest.ExpireBatches(tb, store), telemetry.ExpireTelemetryDeps{Logger: logger, Registerer: reg, TracerProvider: tp})
	pkg := promotiontest.InsertPackage(tb, db, promotiontest.Package{
		Code: "expire-test-" + strings.ToLower(uuid.NewString()[:8]), Name: "Expire test week",
		Kind: domain.PackageKindProjectBoost, DurationDays: 7, BoostWeight: 10,
		Price: decimal.RequireFromString("1500.00"),
	})
	return &expireBundle{
		ctx: context.Background(), db: db, publisher: publisher, store: store, batches: promotiontest.ExpireBatches(tb, store), cycle: cycle,
		logs: logs, reg: reg, spans: spans, pkg: pkg,
	}
}

// run runs one cycle with the given batch size and batch limit.
func (b *expireBundle) run(tb testing.TB, batchSize, maxBatches int) expiry.ExpireCycleResult {
	tb.Helper()
	res, err := b.cycle.Run(b.ctx, promotiontest.ExpireSettings(expiry.ExpireSettings{BatchSize: batchSize, MaxBatchesPerCycle: maxBatches}))
	require.NoError(tb, err)
	return res
}

// insertPurchases stores n purchases of the bundle's package; see
// promotiontest.InsertPurchases.
func (b *expireBundle) insertPurchases(tb testing.TB, n int, spec promotiontest.Purchases) []uuid.UUID {
	tb.Helper()
	return promotiontest.InsertPurchases(tb, b.db, b.pkg, n, spec)
}

// makeDue moves the purchases' periods into the past together (the period
// keeps its length), so that they ended by ago before now.
func (b *expireBundle) makeDue(tb testing.TB, ago time.Duration, ids ...uuid.UUID) {
	tb.Helper()
	promotiontest.MakeDue(tb, b.db, ago, ids...)
}

// insertDue stores n Active purchases that ended an hour ago.
func (b *expireBundle) insertDue(tb testing.TB, n int) []uuid.UUID {
	tb.Helper()
	return promotiontest.InsertDue(tb, b.db, b.pkg, n)
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
	return promotiontest.StatusCounts(tb, b.db)
}

// events returns the events in the outbox, in insertion order.
func (b *expireBundle) events(tb testing.TB) []promotiontest.OutboxEvent {
	tb.Helper()
	return promotiontest.OutboxEvents(tb, b.db)
}

// expiredEvents returns the outbox's events with status Expired by
// purchase id.
func (b *expireBundle) expiredEvents(tb testing.TB) map[uuid.UUID][]promotiontest.OutboxEvent {
	tb.Helper()
	return promotiontest.EventsByPurchase(b.events(tb), contract.StatusExpired)
}

// exec runs statements on the test database.
func (b *expireBundle) exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	promotiontest.Exec(tb, b.db, stmts...)
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

// failUpdatesOf makes every UPDATE of purchase id raise an exception with
// the given SQLSTATE: a row's fault (class 22 or 23) or the batch's (any
// other, postgres.FaultOf).
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
