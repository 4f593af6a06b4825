package boost_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestReplayIntoAnEmptyProjectionGivesTheSameProjection replays the whole
// topic — duplicates and late versions included — into a fresh database
// with the consumer group's offsets deleted, as the runbook does, and gets
// the projection the live consumer built.
func TestReplayIntoAnEmptyProjectionGivesTheSameProjection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	targets := make([]contract.Target, 12)
	for i := range targets {
		targets[i] = project(uuid.New())
	}
	var records []*kgo.Record
	want := map[contract.Target][2]int{} // weight, active purchases
	for i := range 90 {
		p := newPurchase(1+i%9, targets[i%len(targets)], targets[(i+1+i%5)%len(targets)])
		if i%4 >= 2 { // stays Active
			for _, tg := range p.targets {
				w := want[tg]
				want[tg] = [2]int{w[0] + p.weight, w[1] + 1}
			}
		}
		active := record(t, p.envelope(contract.StatusActive, 1))
		records = append(records, active)
		switch i % 4 {
		case 0:
			records = append(records, record(t, p.envelope(contract.StatusCancelled, 2)))
		case 1:
			// A late duplicate: the same message, as its own *kgo.Record (kgo
			// writes into a record it produces, so one cannot be produced twice).
			duplicate := *active
			records = append(records, record(t, p.envelope(contract.StatusExpired, 2)), &duplicate)
		}
	}
	b.produce(t, records...)
	b.waitConsumed(t, float64(len(records)))
	live := projection(t, b.db)
	require.Len(t, live, len(want))
	for tg, w := range want {
		require.Contains(t, live, fmt.Sprintf("%s %s %d %d", tg.TargetKind, tg.TargetID, w[0], w[1]))
	}
	b.stop()

	adm := kadm.NewClient(b.client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := adm.DeleteGroup(ctx, boost.Name)
	require.NoError(t, err)

	empty := testbed.NewDatabase(t)
	b.start(t, empty.Gorm)
	b.waitConsumed(t, float64(len(records)))
	require.Equal(t, live, projection(t, empty))
}

// projection is the boost table as sorted lines.
func projection(t *testing.T, db *testbed.Database) []string {
	t.Helper()
	var rows []struct {
		TargetKind      string
		TargetID        uuid.UUID
		BoostWeight     int
		ActivePurchases int
	}
	require.NoError(t, db.Gorm.Raw(`SELECT target_kind, target_id, boost_weight, active_purchases
		FROM boost.target_boosts ORDER BY target_kind, target_id`).Scan(&rows).Error)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s %s %d %d", r.TargetKind, r.TargetID, r.BoostWeight, r.ActivePurchases)
	}
	return out
}
