package promotion_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// expireModule builds the module on db with its metrics on reg.
func expireModule(tb testing.TB, db *gorm.DB, reg prometheus.Registerer) *promotion.Module {
	tb.Helper()
	m, _ := newModule(tb, db, wiring{
		registerer: reg,
		expire:     promotion.ExpireSettings{Interval: time.Minute, BatchSize: 200, MaxBatchesPerCycle: 1, CycleBudget: 30 * time.Second},
	})
	return m
}

// insertDuePurchases stores n Active purchases of a fresh package, each
// with one target, whose week-long period ended an hour ago.
func insertDuePurchases(tb testing.TB, db *testbed.Database, n int) []uuid.UUID {
	tb.Helper()
	id := uuid.New()
	pkg := promotiontest.InsertPackage(tb, db, promotiontest.Package{
		ID: id, Code: "expire-once-" + id.String()[:8], Name: "Expire test", Kind: domain.PackageKindProjectBoost,
		DurationDays: 7, BoostWeight: 10, Price: decimal.NewFromInt(1500),
	})
	now := time.Now()
	return promotiontest.InsertPurchases(tb, db, pkg, n, promotiontest.Purchases{
		EndsAt: now.Add(-time.Hour), CreatedAt: now.Add(-169 * time.Hour),
	})
}

// The job's metrics exist from the start, with zero values, so that "no
// increase of promotion_expire_run_total" can alert before any cycle ran.
func TestExpireMetricsExportedFromStart(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	before := time.Now()
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
			case f.GetName() == "promotion_expire_interval_seconds":
				require.Equal(t, time.Minute.Seconds(), m.GetGauge().GetValue(), "the configured interval")
			case f.GetName() == "promotion_expire_last_completed_timestamp_seconds":
				// The job's start: the not-running alert counts two intervals from it.
				require.GreaterOrEqual(t, m.GetGauge().GetValue(), float64(before.Unix()))
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
		"promotion_expire_poison_purchases", "promotion_expire_interval_seconds",
		"promotion_expire_last_completed_timestamp_seconds",
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
	require.NotEqual(t, uuid.Nil, res.RunID)
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
	require.Equal(t, res.RunID.String(), fields["runId"])
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
	instances := make([]promotiontest.ExpireRun, 4)
	for i := range instances {
		other, err := postgres.Open(context.Background(), db.URL)
		require.NoError(t, err)
		otherSQL, err := other.DB()
		require.NoError(t, err)
		t.Cleanup(func() { _ = otherSQL.Close() })
		m := expireModule(t, other, prometheus.NewRegistry())
		instances[i] = func() (int, int, error) {
			res, err := m.ExpireOnce(context.Background(), 25)
			return res.Expired, res.SkippedLocked, err
		}
	}
	total, _ := promotiontest.DrainConcurrently(t, instances...)
	require.Equal(t, 300, total)
	var expired, events, purchases int
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases WHERE status = 'Expired'`).Scan(&expired))
	require.Equal(t, 300, expired)
	// Each outbox row's metadata carries the Kafka key, the purchase id.
	require.NoError(t, db.SQL.QueryRow(`SELECT count(*), count(DISTINCT metadata->>$1) FROM outbox.messages WHERE topic = $2`,
		kafka.MetaPartitionKey, contract.Topic).Scan(&events, &purchases))
	require.Equal(t, 300, events, "one event per purchase")
	require.Equal(t, 300, purchases)
}
