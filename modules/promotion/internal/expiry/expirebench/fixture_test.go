package expirebench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pinmarket/pin/modules/promotion/internal/expiry/telemetry"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// outboxTable is the outbox: the purchase-changed topic's table is its only
// partition here, so reads, TRUNCATE and VACUUM of it are the topic's.
const outboxTable = outbox.MessagesTable

// fixture is a database holding a purchases table of a given size, of which
// a given number are due (Active, EndsAt in the past).
type fixture struct {
	db *testbed.Database
	// asOf is a moment after every due purchase's EndsAt and before every
	// other Active purchase's.
	asOf  time.Time
	total int
	due   int
}

// newFixture creates a fresh database with total purchases, due of them
// due. Autovacuum is off on the purchases table so that it cannot start in
// the middle of a measured batch; the benchmarks vacuum between iterations
// instead.
func newFixture(tb testing.TB, total, due int) *fixture {
	tb.Helper()
	return seedFixture(tb, testbed.NewDatabase(tb), total, due)
}

// seedFixture is newFixture on a database migrated already, by this build
// or another.
func seedFixture(tb testing.TB, db *testbed.Database, total, due int) *fixture {
	tb.Helper()
	f := &fixture{db: db, asOf: time.Now().UTC().Truncate(time.Microsecond), total: total, due: due}
	started := time.Now()
	promotiontest.SeedBacklog(tb, db, total, due, f.asOf)
	f.exec(tb, `ALTER TABLE promotion.promotion_purchases SET (autovacuum_enabled = false)`)
	f.exec(tb, `VACUUM (ANALYZE) promotion.promotion_purchases, promotion.promotion_purchase_targets`)
	tb.Logf("seeded %d purchases (%d due) in %s", total, due, time.Since(started).Round(time.Millisecond))
	return f
}

func (f *fixture) exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	_, err := f.db.SQL.ExecContext(context.Background(), query, args...)
	require.NoError(tb, err, query)
}

// restore puts every purchase that has an event in the outbox back to
// Active at version 1, as it was seeded, and empties the outbox, so that the
// next iteration finds the same due rows. The outbox row's partition key is
// the purchase id, so this works the same after the module and the bound.
func (f *fixture) restore(tb testing.TB) {
	tb.Helper()
	f.exec(tb, `UPDATE promotion.promotion_purchases AS p
	SET status = 'Active', version = 1, updated_at = p.starts_at, updated_by_user_id = NULL
	FROM (SELECT DISTINCT (metadata->>'partition_key')::uuid AS id FROM `+outboxTable+`) AS o
	WHERE p.id = o.id`)
	f.exec(tb, `TRUNCATE `+outboxTable)
}

// vacuum removes the dead row versions the iterations leave behind, so
// that the last iteration runs on the same table as the first.
func (f *fixture) vacuum(tb testing.TB) {
	tb.Helper()
	f.exec(tb, `VACUUM (ANALYZE) promotion.promotion_purchases, `+outboxTable)
}

// countDue counts the due purchases left.
func (f *fixture) countDue(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, f.db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases
	WHERE status = 'Active' AND ends_at <= $1`, f.asOf).Scan(&n))
	return n
}

// requireExpiredOnce checks the outcome of a drain: want purchases Expired,
// none due left, and exactly one outbox message per expired purchase, whose
// event says Expired at version 2.
func (f *fixture) requireExpiredOnce(tb testing.TB, want int) {
	tb.Helper()
	var expired, messages, purchases, expiredEvents, strays int
	require.NoError(tb, f.db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases
	WHERE status = 'Expired' AND version = 2 AND ends_at <= $1 AND ends_at > $1 - interval '1 day'`, f.asOf).Scan(&expired))
	require.NoError(tb, f.db.SQL.QueryRow(`
	WITH ev AS (
		SELECT metadata->>'partition_key' AS purchase_id,
			payload->'payload' AS body
		FROM `+outboxTable+`
	)
	SELECT count(*), count(DISTINCT purchase_id),
		count(*) FILTER (WHERE body->>'status' = 'Expired' AND (body->>'version')::int = 2),
		count(*) FILTER (WHERE purchase_id <> body->>'purchaseId')
	FROM ev`).Scan(&messages, &purchases, &expiredEvents, &strays))
	require.Equal(tb, want, expired, "purchases Expired")
	require.Zero(tb, f.countDue(tb), "due purchases left")
	require.Equal(tb, want, messages, "outbox messages")
	require.Equal(tb, want, purchases, "purchases with a message: one message each")
	require.Equal(tb, want, expiredEvents, "Expired events at version 2")
	require.Zero(tb, strays, "messages keyed by another purchase than their payload's")
}

// instance is one expiry cycle as `pin serve` builds it (modules/promotion
// newExpiry): its own pool, outbox publisher, repository, metrics,
// JSON logger and recording tracer provider. Logs go to io.Discard but are
// still formatted; spans are recorded and dropped, as in production
// without an exporter.
type instance struct {
	db      *gorm.DB
	store   *adapters.ExpireRepository
	batches *expiry.ExpireBatches
	cycle   *expiry.ExpireCycle
}

func newInstance(tb testing.TB, url string) *instance {
	tb.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	logger := observability.NewLogger(io.Discard, slog.LevelInfo)
	tp := sdktrace.NewTracerProvider()
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	publisher, err := outbox.NewPublisher(tp)
	require.NoError(tb, err)
	store, err := adapters.NewExpireRepository(db, publisher)
	require.NoError(tb, err)
	cycle := promotiontest.ExpireCycle(tb, promotiontest.ExpireBatches(tb, store), telemetry.ExpireTelemetryDeps{
		Logger: logger.With("module", "promotion"), Registerer: prometheus.NewRegistry(), TracerProvider: tp,
	})
	return &instance{db: db, store: store, batches: promotiontest.ExpireBatches(tb, store), cycle: cycle}
}

// outboxEvent is one outbox row as the relay will read it: the message id,
// the Kafka metadata and the event.
type outboxEvent struct {
	UUID     string
	Metadata map[string]string
	Event    contract.Envelope
}

// readOutbox decodes every outbox row, with the event decoded by the
// contract's consumer-side decoder.
func readOutbox(tb testing.TB, db *testbed.Database) map[string]outboxEvent {
	tb.Helper()
	rows, err := db.SQL.Query(`SELECT uuid, payload::text, metadata::text FROM ` + outboxTable)
	require.NoError(tb, err)
	defer func() { _ = rows.Close() }()
	out := map[string]outboxEvent{}
	for rows.Next() {
		var e outboxEvent
		var payload, metadata string
		require.NoError(tb, rows.Scan(&e.UUID, &payload, &metadata))
		require.NoError(tb, json.Unmarshal([]byte(metadata), &e.Metadata), metadata)
		var err error
		e.Event, err = contract.Decode([]byte(payload), slog.New(slog.NewTextHandler(io.Discard, nil)))
		require.NoError(tb, err, payload)
		require.NoError(tb, e.Event.Validate(), payload)
		out[e.Metadata[kafka.MetaPartitionKey]] = e
	}
	require.NoError(tb, rows.Err())
	return out
}
