package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/testbed"
)

// heldHandler applies nothing until released: a consumer that takes no
// record while its lag waits.
type heldHandler struct {
	flakyHandler
	release chan struct{}
}

func (h heldHandler) Apply(_ context.Context, _ *gorm.DB, _ []consumer.Guarded[testEvent]) error {
	<-h.release
	return nil
}

// TestLagGaugeShowsRecordsWaitingWhileNothingIsTaken: the group's lag is
// exported while the consumer takes nothing, and falls to zero once it does.
func TestLagGaugeShowsRecordsWaitingWhileNothingIsTaken(t *testing.T) {
	t.Parallel()
	k := newKit(t, consumer.Config{Name: "lag-kit-unused"})
	h := heldHandler{release: make(chan struct{})}
	cfg := consumer.Config{Name: "lag-kit", Topic: topic, Brokers: k.brokers, LagInterval: 20 * time.Millisecond}
	r, err := consumer.NewRunner(k.db.Gorm, cfg, h, slog.New(slog.DiscardHandler), k.reg)
	require.NoError(t, err)
	for i := range 3 {
		k.produce(t, testEvent{MessageID: uuid.New(), Aggregate: fmt.Sprint("a", i), Version: 1})
	}
	testbed.StartRunner(t, r)
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release) // before the runner stops
	lag := func(want float64) func() error {
		return func() error {
			if v := testbed.Metric(t, k.reg, "pin_consumer_lag_records").GetGauge().GetValue(); v != want {
				return fmt.Errorf("lag %v, want %v", v, want)
			}
			return nil
		}
	}
	testbed.Eventually(t, lag(3))
	release()
	testbed.Eventually(t, lag(0))
}
