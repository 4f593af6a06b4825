package expirebench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/app"
	"github.com/pinmarket/pin/modules/promotion/internal/ports"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// outboxTable is the outbox table of the purchase-changed topic.
var outboxTable = outbox.TableName(contract.Topic)

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

// seedPurchases builds the table with three set-based statements, never row
// by row. Row i (1-based) is:
//
//   - i <= due: Active, EndsAt between 1 hour and 1h + due seconds before
//     asOf (the backlog);
//   - the next min(due, rest) rows: Active, EndsAt a day or more after asOf
//     (running promotions, in the partial index but not due);
//   - the rest: history, Expired (9 in 10) or Cancelled, EndsAt a month or
//     more before asOf — outside the partial index, as in production.
//
// Every purchase has 1 to 3 targets. Ids grow with i, as the module's
// time-ordered UUIDv7 ids grow with time, so that the primary keys are
// appended to rather than written at random places (several times slower to
// load: docs/performance.md).
const seedPurchases = `
WITH src AS (
	SELECT i, ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id,
		CASE WHEN i <= $2::int + $3::int THEN 'Active' WHEN i % 10 = 0 THEN 'Cancelled' ELSE 'Expired' END AS status,
		CASE WHEN i <= $2::int THEN $4::timestamptz - interval '1 hour' - i * interval '1 second'
			WHEN i <= $2::int + $3::int THEN $4::timestamptz + interval '1 day' + i * interval '1 second'
			ELSE $4::timestamptz - interval '30 days' - i * interval '1 second' END AS ends_at
	FROM generate_series(1, $1::int) AS i
), purchases AS (
	INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
		boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign,
		status, payment_status, starts_at, ends_at, cancel_reason, created_by_user_id, updated_by_user_id,
		created_at, updated_at, version)
	SELECT id, md5('tenant-' || i % 500)::uuid, $5::uuid, 'project-boost-week', 'ProjectBoost',
		10, 1500.00, 643, 'RUB', 'Российский рубль', '₽',
		status, 'NotRequired', ends_at - interval '7 days', ends_at,
		CASE WHEN status = 'Cancelled' THEN 'benchmark history' END, md5('user-' || i % 5000)::uuid, NULL,
		ends_at - interval '7 days',
		CASE WHEN status = 'Active' THEN ends_at - interval '7 days' ELSE ends_at END,
		CASE WHEN status = 'Active' THEN 1 ELSE 2 END
	FROM src
)
INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
SELECT src.id, 'Project', ('00000000-0000-4000-a000-' || lpad(to_hex(src.i * 3 + pos), 12, '0'))::uuid, pos
FROM src, generate_series(0, 2) AS pos
WHERE pos <= src.i % 3`

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
	ctx := context.Background()
	f := &fixture{db: db, asOf: time.Now().UTC().Truncate(time.Microsecond), total: total, due: due}
	notDue := min(due, total-due)
	pkg := uuid.New()
	started := time.Now()
	err := postgres.InTx(ctx, f.db.Gorm, func(tx postgres.Tx) error {
		indexes, err := dropSecondaryIndexes(ctx, tx)
		if err != nil {
			return err
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			// Foreign-key triggers are off for the load: the rows are
			// consistent by construction.
			{`SET LOCAL session_replication_role = replica`, nil},
			{`SET LOCAL maintenance_work_mem = '256MB'`, nil},
			{`INSERT INTO promotion.promotion_packages (id, code, name, kind, duration_days, boost_weight,
				price_amount, currency_id, is_active, created_at, updated_at)
			VALUES ($1, 'project-boost-week', 'Project boost, a week', 'ProjectBoost', 7, 10, 1500.00, 643, true, now(), now())`,
				[]any{pkg}},
			{seedPurchases, []any{total, due, notDue, f.asOf, pkg}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
		for _, def := range indexes {
			if _, err := tx.ExecContext(ctx, def); err != nil {
				return fmt.Errorf("seed: %s: %w", def, err)
			}
		}
		return nil
	})
	require.NoError(tb, err)
	f.exec(tb, `ALTER TABLE promotion.promotion_purchases SET (autovacuum_enabled = false)`)
	f.exec(tb, `VACUUM (ANALYZE) promotion.promotion_purchases, promotion.promotion_purchase_targets`)
	tb.Logf("seeded %d purchases (%d due) in %s", total, due, time.Since(started).Round(time.Millisecond))
	return f
}

// dropSecondaryIndexes drops the indexes of the purchases and targets
// tables that back no constraint (the migration's own definitions are
// returned, to be created again after the load: one sorted build is much
// cheaper than a million random inserts). Primary keys and unique
// constraints stay.
func dropSecondaryIndexes(ctx context.Context, tx postgres.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), pg_get_indexdef(i.indexrelid)
	FROM pg_index AS i
	JOIN pg_class AS c ON c.oid = i.indexrelid
	JOIN pg_namespace AS n ON n.oid = c.relnamespace
	WHERE i.indrelid IN ('promotion.promotion_purchases'::regclass, 'promotion.promotion_purchase_targets'::regclass)
		AND NOT EXISTS (SELECT 1 FROM pg_constraint AS k WHERE k.conindid = i.indexrelid)`)
	if err != nil {
		return nil, fmt.Errorf("seed: list indexes: %w", err)
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("seed: list indexes: %w", err)
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("seed: list indexes: %w", err)
	}
	for _, name := range names {
		if _, err := tx.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	return defs, nil
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
	batches *app.ExpireBatches
	cycle   *app.ExpireCycle
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
	cycle := promotiontest.ExpireCycle(tb, promotiontest.ExpireBatches(tb, store), ports.ExpireTelemetryDeps{
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
