package boost_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestActiveAddsExpiredAndCancelledRemove: the target's boost is the sum of
// boostWeight over its Active purchases, and each terminal event takes away
// exactly its purchase's weight.
func TestActiveAddsExpiredAndCancelledRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, other := project(uuid.New()), project(uuid.New())
	first, second := newPurchase(10, target), newPurchase(5, target, other)

	b.produce(t, record(t, first.envelope(contract.StatusActive, 1)))
	b.requireBoost(t, target, 10, 1)
	b.produce(t, record(t, second.envelope(contract.StatusActive, 1)))
	b.requireBoost(t, target, 15, 2)
	b.requireBoost(t, other, 5, 1)

	b.produce(t, record(t, first.envelope(contract.StatusCancelled, 2)))
	b.requireBoost(t, target, 5, 1)
	b.produce(t, record(t, second.envelope(contract.StatusExpired, 2)))
	b.requireBoost(t, target, 0, 0)
	b.requireBoost(t, other, 0, 0)

	var rows int64
	require.NoError(t, b.db.Gorm.Raw(`SELECT count(*) FROM boost.target_boosts`).Scan(&rows).Error)
	require.Zero(t, rows, "a target without Active purchases keeps no row")
	require.Equal(t, uint64(4), b.delaySamples(t), "the delay occurredAt → applied is observed for each applied event")
}

func TestSameRecordTwiceIsAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	p := newPurchase(10, target)
	r := record(t, p.envelope(contract.StatusActive, 1))

	again := *r // kgo writes into a record it produces: the redelivery is its own copy
	b.produce(t, r, &again)
	b.waitConsumed(t, 2)
	b.requireBoost(t, target, 10, 1)
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_duplicates_total"))
}

func TestOlderVersionAfterNewerIsIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	p := newPurchase(10, target)

	// The cancel overtook the activation: the late Active must not bring the
	// boost back.
	b.produce(t, record(t, p.envelope(contract.StatusCancelled, 2)), record(t, p.envelope(contract.StatusActive, 1)))
	b.waitConsumed(t, 2)
	b.requireBoost(t, target, 0, 0)
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_stale_total"))
	require.True(t, b.logged(t, "stale event skipped", map[string]string{"aggregate_id": p.id.String()}))
}

// TestUnknownTargetKindIsIgnoredWithAWarning: a target kind of a later
// contract revision is kept by Decode and skipped by this consumer; the
// purchase's known targets still get their boost.
func TestUnknownTargetKindIsIgnoredWithAWarning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	known := project(uuid.New())
	billboard := contract.Target{TargetKind: "Billboard", TargetID: uuid.New()}
	p := newPurchase(7, known, billboard)

	b.produce(t, record(t, p.envelope(contract.StatusActive, 1)))
	b.requireBoost(t, known, 7, 1)
	require.True(t, b.logged(t, "target of an unknown kind ignored", map[string]string{"target_kind": "Billboard", "purchase_id": p.id.String()}))
	require.True(t, b.logged(t, "unknown enum value kept as is", map[string]string{"value": "Billboard"}))
	var rows int64
	require.NoError(t, b.db.Gorm.Raw(`SELECT count(*) FROM boost.target_boosts WHERE target_kind = 'Billboard'`).Scan(&rows).Error)
	require.Zero(t, rows)
	require.Zero(t, b.counter(t, "pin_consumer_dead_letters_total"))
}

// TestAnotherContractVersionIsWarnedAboutAndApplied: the contract asks a
// consumer to log a warning and carry on at another contractVersion.
func TestAnotherContractVersionIsWarnedAboutAndApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	e := newPurchase(3, target).envelope(contract.StatusActive, 1)
	e.ContractVersion = 2

	b.produce(t, record(t, e))
	b.requireBoost(t, target, 3, 1)
	require.True(t, b.logged(t, "event of another contract version, decoding as version 1", map[string]string{"value": "2"}))
}

// TestNonJSONRecordIsDeadLetteredAndTheNextApplied: a poison record does not
// stop its partition.
func TestNonJSONRecordIsDeadLetteredAndTheNextApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	p := newPurchase(4, target)
	poison := &kgo.Record{Key: []byte(p.id.String()), Value: []byte("this is not JSON"),
		Headers: []kgo.RecordHeader{{Key: contract.HeaderMessageID, Value: []byte(uuid.NewString())}}}

	// Same key: the same partition, the poison first.
	b.produce(t, poison, record(t, p.envelope(contract.StatusActive, 1)))
	b.requireBoost(t, target, 4, 1)
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_dead_letters_total"))

	var dl struct {
		Consumer string
		Value    []byte
		Error    string
		Attempts int
	}
	require.NoError(t, b.db.Gorm.Raw(`SELECT consumer, value, error, attempts FROM consumer.dead_letters`).Scan(&dl).Error)
	require.Equal(t, "boost", dl.Consumer)
	require.Equal(t, "this is not JSON", string(dl.Value))
	require.Contains(t, dl.Error, "contract.Decode")
	require.Equal(t, 1, dl.Attempts)
}

// TestRecordThatContradictsItselfIsDeadLettered: key ≠ aggregateId is never
// guessed at.
func TestRecordThatContradictsItselfIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := project(uuid.New())
	r := record(t, newPurchase(4, target).envelope(contract.StatusActive, 1))
	r.Key = []byte(uuid.NewString())

	b.produce(t, r)
	b.waitConsumed(t, 1)
	require.Equal(t, 1.0, b.counter(t, "pin_consumer_dead_letters_total"))
	b.requireBoost(t, target, 0, 0)
}

func TestBoostRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, body := b.get(t, "/api/developers/v1/promotion-boosts/Project/"+uuid.NewString())
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"boostWeight":0,"activePurchases":0`)

	code, body = b.get(t, "/api/developers/v1/promotion-boosts/Billboard/"+uuid.NewString())
	require.Equal(t, http.StatusUnprocessableEntity, code, body)
	require.Contains(t, body, "targetKind")

	code, _ = b.get(t, "/api/developers/v1/promotion-boosts/Post/not-a-uuid")
	require.Equal(t, http.StatusUnprocessableEntity, code)

	b.token = "invalid"
	code, _ = b.get(t, "/api/developers/v1/promotion-boosts/Post/"+uuid.NewString())
	require.Equal(t, http.StatusUnauthorized, code)
}

// TestPurchasesOfOneBatchAddUpOnTheirTarget: records already on the topic
// when the consumer starts come in batches, where several purchases boost the
// same target and a purchase's later event supersedes its earlier one; the
// projection is the same as event by event.
func TestPurchasesOfOneBatchAddUpOnTheirTarget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.stop()
	target := project(uuid.New())
	var records []*kgo.Record
	for weight := 1; weight <= 12; weight++ {
		p := newPurchase(weight, target)
		records = append(records, record(t, p.envelope(contract.StatusActive, 1)))
		if weight <= 6 {
			records = append(records, record(t, p.envelope(contract.StatusCancelled, 2)))
		}
	}
	b.produce(t, records...)
	b.stop = b.start(t, b.db.Gorm)

	b.waitConsumed(t, float64(len(records)))
	b.requireBoost(t, target, 7+8+9+10+11+12, 6)
	batches := testbed.Metric(t, b.reg, "pin_consumer_batch_events").GetHistogram()
	require.Less(t, batches.GetSampleCount(), uint64(len(records)), "some transaction must carry more than one event")
}
