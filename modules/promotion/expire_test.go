package promotion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// expireModule builds the module on db with its metrics on reg.
func expireModule(tb testing.TB, db *gorm.DB, reg prometheus.Registerer) *promotion.Module {
	tb.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	publisher, err := outbox.NewPublisher(logger, noop.NewTracerProvider())
	require.NoError(tb, err)
	authn, err := auth.NewAuthenticator([]byte("expire-test-secret-0123456789abcdef0123"))
	require.NoError(tb, err)
	m, err := promotion.New(promotion.Deps{
		DB: db, Outbox: publisher, Auth: authn, Logger: logger, Registerer: reg,
		Expire: promotion.ExpireConfig{Interval: time.Minute, BatchSize: 200, MaxBatchesPerCycle: 1, CycleBudget: 30 * time.Second},
	})
	require.NoError(tb, err)
	return m
}

// insertDuePurchases stores n Active purchases, each with one target, whose
// week-long period ended an hour ago.
func insertDuePurchases(tb testing.TB, db *testbed.Database, n int) []uuid.UUID {
	tb.Helper()
	ctx := context.Background()
	pkg := uuid.New()
	_, err := db.SQL.ExecContext(ctx, `INSERT INTO promotion.promotion_packages
		(id, code, name, kind, duration_days, boost_weight, price_amount, currency_id, is_active, created_at, updated_at)
		VALUES ($1, $2, 'Expire test', 'ProjectBoost', 7, 10, 1500, 643, true, now(), now())`,
		pkg, "expire-once-"+pkg.String()[:8])
	require.NoError(tb, err)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	strs := make([]string, n)
	for i, id := range ids {
		strs[i] = id.String()
	}
	_, err = db.SQL.ExecContext(ctx, `INSERT INTO promotion.promotion_purchases
		(id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		 currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		 created_by_user_id, created_at, updated_at, version)
		SELECT u.id, gen_random_uuid(), $2, p.code, 'ProjectBoost', 10, 1500, 643, 'RUB', 'Российский рубль', '₽',
			'Active', 'NotRequired', now() - interval '169 hours', now() - interval '1 hour',
			gen_random_uuid(), now() - interval '169 hours', now() - interval '169 hours', 1
		FROM unnest($1::uuid[]) AS u(id), promotion.promotion_packages p WHERE p.id = $2`, strs, pkg)
	require.NoError(tb, err)
	_, err = db.SQL.ExecContext(ctx, `INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
		SELECT id, 'Project', gen_random_uuid(), 0 FROM unnest($1::uuid[]) AS id`, strs)
	require.NoError(tb, err)
	return ids
}

// The job's metrics exist from the start, with zero values, so that "no
// increase of promotion_expire_run_total" can alert before any cycle ran.
func TestExpireMetricsExportedFromStart(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	expireModule(t, testbed.NewDatabase(t).Gorm, reg)

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				label += l.GetName() + "=" + l.GetValue()
			}
			got[f.GetName()] = append(got[f.GetName()], label)
			switch {
			case m.GetCounter() != nil:
				require.Zero(t, m.GetCounter().GetValue(), f.GetName())
			case m.GetGauge() != nil:
				require.Zero(t, m.GetGauge().GetValue(), f.GetName())
			case m.GetHistogram() != nil:
				require.Zero(t, m.GetHistogram().GetSampleCount(), f.GetName())
			}
		}
	}
	for _, name := range []string{
		"promotion_expire_run_total", "promotion_expire_cycle_duration_seconds", "promotion_expire_backlog",
		"promotion_expire_skip_locked_total", "promotion_expire_errors_total",
	} {
		require.Contains(t, got, name)
	}
	items := got["promotion_expire_items_total"]
	sort.Strings(items)
	require.Equal(t, []string{"outcome=expired", "outcome=failed"}, items)
}

// The module runs the job as the runner "expire-promotions".
func TestExpireRunnerIsRegistered(t *testing.T) {
	t.Parallel()
	m := expireModule(t, testbed.NewDatabase(t).Gorm, prometheus.NewRegistry())
	var names []string
	for _, r := range m.Runners() {
		names = append(names, r.Name())
	}
	require.Contains(t, names, "expire-promotions")
}

// ExpireOnce (pin expire-promotions --once) runs one batch of the given
// size; its result prints as the JSON line interfaces.md fixes. A poison
// item is counted, not an error.
func TestExpireOnce(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	m := expireModule(t, db.Gorm, prometheus.NewRegistry())
	ids := insertDuePurchases(t, db, 5)
	// The poison item: no targets, and the oldest, so the first batch takes it.
	_, err := db.SQL.ExecContext(context.Background(),
		`DELETE FROM promotion.promotion_purchase_targets WHERE purchase_id = $1`, ids[0])
	require.NoError(t, err)
	_, err = db.SQL.ExecContext(context.Background(), `UPDATE promotion.promotion_purchases
		SET starts_at = starts_at - interval '1 hour', ends_at = ends_at - interval '1 hour' WHERE id = $1`, ids[0])
	require.NoError(t, err)

	res, err := m.ExpireOnce(context.Background(), 3)
	require.NoError(t, err)
	require.Equal(t, 2, res.Expired, "a batch of 3: the poison item and two others")
	require.Equal(t, 1, res.Failed)
	require.Zero(t, res.SkippedLocked)
	_, err = uuid.Parse(res.RunID)
	require.NoError(t, err)
	require.Equal(t, time.UTC, res.AsOf.Location())

	line, err := json.Marshal(res)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(line, &fields))
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"asOf", "durationMs", "expired", "failed", "runId", "skippedLocked"}, keys)
	require.Equal(t, res.RunID, fields["runId"])
	require.EqualValues(t, 2, fields["expired"])

	again, err := m.ExpireOnce(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 2, again.Expired, "the configured batch size takes the rest")
	require.Equal(t, 1, again.Failed, "the poison item is retried")
}

// Several ExpireOnce at once (several `pin expire-promotions --once`
// processes, each with its own module and pool) expire each purchase once.
func TestExpireOnceConcurrently(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	insertDuePurchases(t, db, 300)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	errs := make(chan error, 4)
	for range 4 {
		other, err := postgres.Open(context.Background(), db.URL)
		require.NoError(t, err)
		otherSQL, err := other.DB()
		require.NoError(t, err)
		t.Cleanup(func() { _ = otherSQL.Close() })
		m := expireModule(t, other, prometheus.NewRegistry())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := m.ExpireOnce(context.Background(), 25)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total += res.Expired
				mu.Unlock()
				if res.Expired == 0 && res.SkippedLocked == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 300, total)
	var expired, events, purchases int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Expired'`).Scan(&expired))
	require.Equal(t, 300, expired)
	// Each outbox row holds the forwarder's envelope; its metadata carries
	// the Kafka key, the purchase id.
	require.NoError(t, db.SQL.QueryRow(fmt.Sprintf(`SELECT count(*), count(DISTINCT payload->'metadata'->>'%s') FROM %s`,
		outbox.MetaPartitionKey, outbox.TableName(contract.Topic))).Scan(&events, &purchases))
	require.Equal(t, 300, events, "one event per purchase")
	require.Equal(t, 300, purchases)
}
