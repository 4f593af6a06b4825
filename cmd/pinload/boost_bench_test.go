package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/testbed"
)

// BenchmarkBoostEndToEnd measures the delay from the API's commit of a
// purchase to its boost in the reference projection, across the whole
// chain: the purchase transaction, the outbox, the relay, Kafka (kfake),
// the consumer and its transaction. It starts `pin serve` with
// PIN_BOOST_PROJECTION=on, offers 200 purchases/s (one new project each) for
// 10 s from 8 clients, waits until every one is in the projection, and
// computes in PostgreSQL, on one clock, target_boosts.updated_at (taken
// inside the consumer's transaction) minus promotion_purchases.updated_at
// (taken inside the API's, just before its commit): p50-ms, p99-ms, max-ms.
// Run it with -benchtime 1x.
func BenchmarkBoostEndToEnd(b *testing.B) {
	for range b.N {
		ctx := context.Background()
		db := testbed.NewDatabase(b)
		brokers := testbed.NewKafka(b, contract.Topic)
		srv := startServer(b, db.URL, brokers, "PIN_BOOST_PROJECTION=on")
		pkg, err := createPackage(ctx, srv.baseURL, srv.issue(b, auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}))
		require.NoError(b, err)
		cfg := loadConfig{BaseURL: srv.baseURL, TenantToken: srv.issue(b, auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}), PackageID: pkg}
		client := newHTTPClient(8)

		const rate, duration = 200, 10 * time.Second
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failures []string
		tick := time.NewTicker(time.Second / rate)
		for end := time.Now().Add(duration); time.Now().Before(end); {
			<-tick.C
			wg.Go(func() {
				// n = 0: one target per purchase, so each target's row is
				// written by exactly one event.
				if _, msg := purchase(ctx, client, cfg, nil, 0); msg != "" {
					mu.Lock()
					failures = append(failures, msg)
					mu.Unlock()
				}
			})
		}
		tick.Stop()
		wg.Wait()
		require.Empty(b, failures)

		var purchases, applied int
		require.NoError(b, db.SQL.QueryRow(`SELECT count(*) FROM promotion.promotion_purchases`).Scan(&purchases))
		testbed.Eventually(b, func() error {
			require.NoError(b, db.SQL.QueryRow(`SELECT count(*) FROM boost.target_boosts`).Scan(&applied))
			if applied != purchases {
				return fmt.Errorf("%d of %d purchases in the projection", applied, purchases)
			}
			return nil
		})

		var p50, p99, maxMS float64
		require.NoError(b, db.SQL.QueryRow(`
			WITH d AS (
				SELECT extract(epoch FROM b.updated_at - p.updated_at) * 1000 AS ms
				FROM promotion.promotion_purchases p
				JOIN promotion.promotion_purchase_targets t ON t.purchase_id = p.id
				JOIN boost.target_boosts b ON b.target_kind = t.target_kind AND b.target_id = t.target_id)
			SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
			       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms) FROM d`).Scan(&p50, &p99, &maxMS))
		b.Logf("%d purchases at %d/s: API commit → projection p50 %.1f ms, p99 %.1f ms, max %.1f ms", purchases, rate, p50, p99, maxMS)
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
		b.ReportMetric(maxMS, "max-ms")
	}
}
