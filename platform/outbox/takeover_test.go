package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestThreeRelaysTakeOverUnderTraffic runs three relays against one outbox
// for two minutes under 12 writers. Writers of one key serialise on the
// key's row, as the module's writers of one purchase do on the purchase
// row. The active relay is stopped (and restarted) once, and later loses
// its database (its pool closed, its lock session ended with the runbook's
// query and pg_terminate_backend; then restarted). Each time a
// standby takes over within 5s; every event arrives at least once, in order
// per key; duplicates are counted and reported.
func TestThreeRelaysTakeOverUnderTraffic(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for two minutes")
	}
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	const keys, writers = 24, 12
	_, err := b.db.SQL.Exec(`CREATE TABLE purchases (id text PRIMARY KEY, seq int NOT NULL DEFAULT 0)`)
	require.NoError(t, err)
	_, err = b.db.SQL.Exec(`INSERT INTO purchases (id) SELECT 'purchase-' || i FROM generate_series(1, $1::int) i`, keys)
	require.NoError(t, err)

	// Each relay has a pool of its own, as each instance of pin serve does.
	type instance struct {
		reg  *prometheus.Registry
		pool *sql.DB
		stop func()
	}
	start := func() instance {
		pool, err := sql.Open("pgx", b.db.URL)
		require.NoError(t, err)
		t.Cleanup(func() { _ = pool.Close() })
		reg := prometheus.NewRegistry()
		r, err := relay.New(pool, relay.Config{
			Brokers: brokers, Topics: []string{topic}, PollInterval: 20 * time.Millisecond, LockRetryInterval: time.Second,
		}, b.logger, reg, noop.NewTracerProvider())
		require.NoError(t, err)
		return instance{reg: reg, pool: pool, stop: testbed.StartRunner(t, r)}
	}
	relays := []instance{start(), start(), start()}
	// active is the relay that reports itself active, -1 when none does, and
	// fails when two do. A relay interrupted by the test (ousted) may still
	// report it until its next statement finds its session gone, while a
	// standby already holds the lock: it is left out until it is restarted.
	active := func(ousted ...int) int {
		n, idx := 0, -1
		for i, r := range relays {
			if slices.Contains(ousted, i) {
				continue
			}
			if metricValue(t, r.reg, "pin_outbox_relay_active") == 1 {
				n, idx = n+1, i
			}
		}
		require.LessOrEqual(t, n, 1, "one active relay at most")
		return idx
	}

	var written atomic.Int64
	ctx, stopWriting := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stopWriting()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for ctx.Err() == nil {
				key := fmt.Sprintf("purchase-%d", 1+rand.IntN(keys))
				err := postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
					var seq int
					if err := tx.GORM().Raw(`UPDATE purchases SET seq = seq + 1 WHERE id = ? RETURNING seq`, key).Scan(&seq).Error; err != nil {
						return err
					}
					return publish(b.ctx, b.pub, tx, topic, event(key, seq))
				})
				if !assert.NoError(t, err) {
					return
				}
				written.Add(1)
				time.Sleep(time.Duration(60+rand.IntN(120)) * time.Millisecond) // about 100 transactions/s in all
			}
		})
	}

	c := newConsumer(t, brokers)
	// takeover interrupts the settled active relay and waits for another
	// one to take over; restart (optional) then brings the interrupted one
	// back as a standby.
	takeover := func(what string, interrupt, restart func(i int)) {
		waitFor(t, "an active relay", func() bool { return active() >= 0 })
		time.Sleep(30 * time.Second) // traffic under a settled leader
		i := active()
		before := time.Now()
		interrupt(i)
		waitFor(t, "a standby to take over", func() bool { return active(i) >= 0 })
		took := time.Since(before)
		t.Logf("%s: relay %d took over %v later", what, active(i), took)
		require.Less(t, took, 5*time.Second)
		if restart != nil {
			restart(i)
		}
	}
	takeover("active relay stopped", func(i int) { relays[i].stop() }, func(i int) { relays[i] = start() })
	runbook, err := os.ReadFile(outboxRunbook)
	require.NoError(t, err)
	holder := strings.TrimSuffix(sqlAfter(t, string(runbook), "### 2. Is a relay active?"), ";")
	takeover("active relay lost its database", func(i int) {
		var pid int
		require.NoError(t, b.db.SQL.QueryRow(`SELECT pid FROM (`+holder+`) h`).Scan(&pid))
		// Its database is gone for good: no new connection, and the
		// session holding the lock ends.
		require.NoError(t, relays[i].pool.Close())
		_, err := b.db.SQL.Exec(`SELECT pg_terminate_backend($1)`, pid)
		require.NoError(t, err)
	}, func(i int) { relays[i].stop(); relays[i] = start() })
	wg.Wait()

	total := int(written.Load())
	seen := requireOrderedPerKey(t, c.untilDistinct(t, total))
	require.Len(t, seen, total, "every event at least once")
	dups := len(c.records) - len(seen)
	t.Logf("%d events in 2 minutes, %d records: %d duplicates (two takeovers)", total, len(c.records), dups)
	require.LessOrEqual(t, dups, 2*200, "duplicates only around a takeover: at most a batch each")
}
