package promotiontest_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/testbed"
)

// The fixtures store what their doc comments promise: the tests that use
// them rely on the shapes, not only on the row counts.
func TestInsertPurchasesShapes(t *testing.T) {
	t.Parallel()
	db := testbed.NewDatabase(t)
	pkg := promotiontest.InsertPackage(t, db, promotiontest.Package{
		Code: "fixture-post-week", Name: "Fixture", Kind: domain.PackageKindPostBoost,
		DurationDays: 7, BoostWeight: 5, Price: decimal.RequireFromString("99.90"),
	})
	require.NotEqual(t, uuid.Nil, pkg.ID)

	endsAt := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	active := promotiontest.InsertPurchases(t, db, pkg, 2, promotiontest.Purchases{Targets: 3, EndsAt: endsAt})
	cancelled := promotiontest.InsertPurchases(t, db, pkg, 1, promotiontest.Purchases{Status: domain.StatusCancelled})
	expired := promotiontest.InsertPurchases(t, db, pkg, 1, promotiontest.Purchases{Status: domain.StatusExpired})
	require.Len(t, active, 2)
	require.Equal(t, map[string]int{"Active": 2, "Cancelled": 1, "Expired": 1}, promotiontest.StatusCounts(t, db))

	var starts, ends time.Time
	var code, kind, price string
	var weight int
	require.NoError(t, db.SQL.QueryRow(`SELECT starts_at, ends_at, package_code, package_kind, boost_weight, price_amount::text
		FROM promotion.promotion_purchases WHERE id = $1`, active[0]).Scan(&starts, &ends, &code, &kind, &weight, &price))
	require.True(t, ends.Equal(endsAt))
	require.Equal(t, 7*24*time.Hour, ends.Sub(starts), "a purchase runs its package's duration")
	require.Equal(t, []any{"fixture-post-week", "PostBoost", 5, "99.90"}, []any{code, kind, weight, price})

	require.Equal(t, 3, promotiontest.Count(t, db, `SELECT count(*) FROM promotion.promotion_purchase_targets
		WHERE purchase_id = $1 AND target_kind = 'Post' AND position BETWEEN 0 AND 2`, active[1]))
	require.Equal(t, 1, promotiontest.Count(t, db, `SELECT count(*) FROM promotion.promotion_purchases
		WHERE id = $1 AND version = 2 AND cancel_reason IS NOT NULL`, cancelled[0]))
	require.Equal(t, 1, promotiontest.Count(t, db, `SELECT count(*) FROM promotion.promotion_purchases
		WHERE id = $1 AND version = 2 AND cancel_reason IS NULL`, expired[0]))

	promotiontest.MakeDue(t, db, time.Hour, active[0])
	require.NoError(t, db.SQL.QueryRow(`SELECT starts_at, ends_at FROM promotion.promotion_purchases WHERE id = $1`,
		active[0]).Scan(&starts, &ends))
	require.WithinDuration(t, time.Now().Add(-time.Hour), ends, time.Minute)
	require.Equal(t, 7*24*time.Hour, ends.Sub(starts), "the period keeps its length")
	require.Zero(t, promotiontest.OutboxCount(t, db))
	require.Empty(t, promotiontest.OutboxEvents(t, db))
}

func TestLogBufferRecords(t *testing.T) {
	t.Parallel()
	var l promotiontest.LogBuffer
	_, err := l.Write([]byte(`{"msg":"a","n":1}` + "\n" + `{"msg":"b"}` + "\n" + `{"msg":"a","n":2}` + "\n"))
	require.NoError(t, err)
	recs := l.Records(t, "a")
	require.Len(t, recs, 2)
	require.EqualValues(t, 2, recs[1]["n"])
	require.Contains(t, l.String(), `"msg":"b"`)
}

func TestDrainConcurrentlyStopsEachInstanceWhenIdle(t *testing.T) {
	t.Parallel()
	backlog := make(chan struct{}, 10)
	for range 10 {
		backlog <- struct{}{}
	}
	close(backlog)
	take := func() (int, int, error) {
		if _, ok := <-backlog; ok {
			return 1, 0, nil
		}
		return 0, 0, nil
	}
	expired, skipped := promotiontest.DrainConcurrently(t, take, take, take)
	require.Equal(t, 10, expired)
	require.Zero(t, skipped)
}
