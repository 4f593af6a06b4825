package boost_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestProjectionUpdatesAreHOT: the projection's updates of a target's row
// change no indexed column, so PostgreSQL writes them heap-only (HOT) and
// prunes the old versions itself, without a VACUUM.
// Purchases come and go on a few targets, round after round, as in
// production where popular targets are bought again and again.
func TestProjectionUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.stop()
	// One session does every write, so that the test can flush its counters.
	b.db.SQL.SetMaxOpenConns(1)
	b.stop = b.start(t, b.db.Gorm)

	targets := []contract.Target{project(uuid.New()), project(uuid.New()), project(uuid.New()), project(uuid.New())}
	var live []purchase
	consumed := 0
	for round := range 60 {
		p := newPurchase(1+round%5, targets[round%4], targets[(round+1)%4])
		records := []*kgo.Record{record(t, p.envelope(contract.StatusActive, 1))}
		live = append(live, p)
		if len(live) > 3 {
			records = append(records, record(t, live[0].envelope(contract.StatusCancelled, 2)))
			live = live[1:]
		}
		b.produce(t, records...)
		consumed += len(records)
		b.waitConsumed(t, float64(consumed))
	}
	// The live purchases are those of rounds 57 to 59, two of them on targets[3].
	b.requireBoost(t, targets[3], 4+5, 2)

	stats := testbed.ReadTableStats(t, b.db.SQL, "boost.target_boosts")
	t.Logf("boost.target_boosts: %d updates, %d HOT, %d dead tuples", stats.Updates, stats.HOTUpdates, stats.DeadTuples)
	require.GreaterOrEqual(t, stats.Updates, int64(100), "the rounds must have updated the targets' rows")
	require.GreaterOrEqual(t, stats.HOTRatio(), 0.9, "n_tup_hot_upd / n_tup_upd of boost.target_boosts")
}
