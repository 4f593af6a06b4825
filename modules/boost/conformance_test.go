package boost_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/contracttest"
)

// TestBoostProjectionKeepsTheContract runs the reference boost projection,
// on the consumer kit, PostgreSQL and the Kafka wire protocol, through the
// contract's conformance kit: each record is produced to the topic, and the
// kit is told it was refused when the projection dead-lettered it.
func TestBoostProjectionKeepsTheContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	contracttest.Run(t, contracttest.Consumer{Handle: b.handleThroughTheTopic, Observe: b.observe})
}

// handleThroughTheTopic produces r and waits until the consumer
// acknowledged it; a dead letter's error is returned as the refusal. It
// reports through errors, not t: the kit calls it from its subtests.
func (b *bundle) handleThroughTheTopic(ctx context.Context, r contract.Record) error {
	consumed, err := b.counterValue("pin_consumer_consumed_total")
	if err != nil {
		return err
	}
	rec := &kgo.Record{Key: r.Key, Value: r.Value}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(r.Headers[k])})
	}
	produced, err := b.client.ProduceSync(ctx, rec).First()
	if err != nil {
		return fmt.Errorf("harness: produce: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := b.counterValue("pin_consumer_consumed_total")
		if err != nil {
			return err
		}
		if n > consumed {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("harness: the record was not consumed within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var refusals []string
	if err := b.db.Gorm.WithContext(ctx).Raw(`SELECT error FROM consumer.dead_letters
		WHERE consumer = 'boost' AND kafka_partition = ? AND kafka_offset = ?`, produced.Partition, produced.Offset).
		Scan(&refusals).Error; err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	if len(refusals) > 0 {
		return errors.New(refusals[0])
	}
	return nil
}

// observe reads the projection: the purchases with rows, and every target's
// boost.
func (b *bundle) observe(ctx context.Context) (contracttest.Observation, error) {
	obs := contracttest.Observation{Active: map[uuid.UUID]bool{}, Boosts: map[contract.Target]int{}}
	var active []uuid.UUID
	if err := b.db.Gorm.WithContext(ctx).Raw(`SELECT DISTINCT purchase_id FROM boost.purchase_targets`).Scan(&active).Error; err != nil {
		return obs, err
	}
	for _, id := range active {
		obs.Active[id] = true
	}
	var boosts []struct {
		TargetKind  string
		TargetID    uuid.UUID
		BoostWeight int
	}
	if err := b.db.Gorm.WithContext(ctx).Raw(`SELECT target_kind, target_id, boost_weight FROM boost.target_boosts`).
		Scan(&boosts).Error; err != nil {
		return obs, err
	}
	for _, r := range boosts {
		obs.Boosts[contract.Target{TargetKind: contract.TargetKind(r.TargetKind), TargetID: r.TargetID}] = r.BoostWeight
	}
	return obs, nil
}

// counterValue is a counter of the boost consumer, 0 before its first
// increment.
func (b *bundle) counterValue(name string) (float64, error) {
	families, err := b.reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("harness: gather: %w", err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}
