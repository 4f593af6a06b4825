package boost_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
)

// snapshot lays e out as `pin promotion snapshot` does: the record of a
// transition with the event_origin header saying "snapshot".
func snapshot(tb testing.TB, e contract.Envelope) *kgo.Record {
	tb.Helper()
	r := record(tb, e)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: contract.HeaderEventOrigin, Value: []byte("snapshot")})
	return r
}

// requireBoostNow fails tb unless the target shows weight and active at
// once: for after waitConsumed, when nothing is in flight that could still
// change it.
func (b *bundle) requireBoostNow(tb testing.TB, t contract.Target, weight, active int) {
	tb.Helper()
	w, a := b.boostOf(tb, t)
	require.Equal(tb, [2]int{weight, active}, [2]int{w, a}, "boost of %s: weight, active purchases", t.TargetID)
}

// TestSnapshotAtOrBelowTheAppliedVersionChangesNothing: a snapshot written
// right after its transition carries the transition's version, and the
// guard skips an equal version as it skips a lower one. Their states are
// chosen so that applying them would show: a Cancelled snapshot at the
// Active version, an Active one below the Cancelled version.
func TestSnapshotAtOrBelowTheAppliedVersionChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	active, cancelled := newPurchase(10, target), newPurchase(5, target)
	b.produce(t, record(t, active.envelope(contract.StatusActive, 1)),
		record(t, cancelled.envelope(contract.StatusActive, 1)), record(t, cancelled.envelope(contract.StatusCancelled, 2)))
	b.requireBoost(t, target, 10, 1)

	b.produce(t, snapshot(t, active.envelope(contract.StatusCancelled, 1)), snapshot(t, cancelled.envelope(contract.StatusActive, 1)))
	b.waitConsumed(t, 5)
	b.requireBoostNow(t, target, 10, 1)
	require.Equal(t, 2.0, b.counter(t, "pin_consumer_stale_total"))
	stale := b.logs.Records(t, "stale event skipped")
	require.Len(t, stale, 2)
	for _, rec := range stale {
		require.Equal(t, "snapshot", rec["origin"])
		require.Equal(t, "DEBUG", rec["level"], "a snapshot the consumer has seen is the expected case")
	}
}

// TestSnapshotsRebuildAnEmptyProjection: with none of the purchases'
// transitions on the topic (gone with the retention), their snapshots build
// the projection as the transitions would have, an ended one included; the
// transitions after them apply on top, and a second snapshot run changes
// nothing.
func TestSnapshotsRebuildAnEmptyProjection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, c := project(uuid.New()), project(uuid.New())
	first, second, ended := newPurchase(10, a, c), newPurchase(5, a), newPurchase(7, a)
	// Each run gives new messageIds, as a snapshot under derived ids does
	// (--send-derived-ids): the version guard, not the inbox, keeps it a no-op.
	run := func() []*kgo.Record {
		return []*kgo.Record{snapshot(t, first.envelope(contract.StatusActive, 3)),
			snapshot(t, second.envelope(contract.StatusActive, 1)), snapshot(t, ended.envelope(contract.StatusCancelled, 2))}
	}
	b.produce(t, run()...)
	b.waitConsumed(t, 3)
	b.requireBoost(t, a, 15, 2)
	b.requireBoost(t, c, 10, 1)
	require.Zero(t, b.counter(t, "pin_consumer_stale_total"))

	b.produce(t, record(t, first.envelope(contract.StatusExpired, 4)))
	b.requireBoost(t, a, 5, 1)
	b.requireBoost(t, c, 0, 0)

	b.produce(t, run()...)
	b.waitConsumed(t, 7)
	b.requireBoostNow(t, a, 5, 1)
	require.Equal(t, 3.0, b.counter(t, "pin_consumer_stale_total"), "the second run is at the versions applied")
	require.Equal(t, uint64(1), b.delaySamples(t), "only the transition's delay is observed: a snapshot's occurredAt is its state's")
}

// TestNewerSnapshotReplacesTheContributionOnce: a snapshot above the applied
// version replaces the purchase's contribution, never adds to it, and one
// carrying an ended status (its transition lost) removes it as the
// transition would.
func TestNewerSnapshotReplacesTheContributionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	p := newPurchase(10, target)
	b.produce(t, record(t, p.envelope(contract.StatusActive, 1)))
	b.requireBoost(t, target, 10, 1)

	b.produce(t, snapshot(t, p.envelope(contract.StatusActive, 2)))
	b.waitConsumed(t, 2)
	b.requireBoostNow(t, target, 10, 1)

	b.produce(t, snapshot(t, p.envelope(contract.StatusCancelled, 3)))
	b.requireBoost(t, target, 0, 0)
	require.Zero(t, b.counter(t, "pin_consumer_stale_total"))
}
