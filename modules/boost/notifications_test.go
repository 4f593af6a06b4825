package boost_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/testbed"
)

// notifier is a notifications-style consumer, as docs/consuming-the-event.md
// shows it: it tells the buyer about each transition of a purchase, so it
// skips snapshots, which repeat a state rather than report a change. It
// decodes as the boost projection does.
type notifier struct{ boost.Projection }

func (notifier) Apply(ctx context.Context, tx *gorm.DB, events []consumer.Guarded[contract.Envelope]) error {
	for _, e := range events {
		if e.Origin == consumer.OriginSnapshot {
			continue // not a change: the buyer heard of this state already, or it is too late to tell
		}
		p := e.Body.Payload
		// Into the service's own outbox, in the kit's transaction; sent from there, never from Apply.
		err := tx.WithContext(ctx).Exec(`INSERT INTO notification_outbox (message_id, tenant_id, purchase_id, status)
			VALUES (?, ?, ?, ?)`, e.MessageID, p.TenantID, p.PurchaseID, string(p.Status)).Error
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
	}
	return nil
}

// TestNotifierSkipsSnapshotsAndNotifiesEachTransitionOnce: of a purchase's
// transitions and the snapshots written after them (at the same versions,
// and of a purchase whose transition the consumer never saw), only the
// transitions are notified, each once.
func TestNotifierSkipsSnapshotsAndNotifiesEachTransitionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.db.Gorm.Exec(`CREATE TABLE notification_outbox (
		message_id uuid PRIMARY KEY, tenant_id uuid NOT NULL, purchase_id uuid NOT NULL, status text NOT NULL)`).Error)
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	runner, err := consumer.NewRunner(b.db.Gorm, consumer.Config{Name: "notifications-promotion-events", Topic: contract.Topic,
		Brokers: b.brokers}, notifier{boost.Projection{Logger: logger}}, logger, reg)
	require.NoError(t, err)
	testbed.StartRunner(t, runner)

	seen, unseen := newPurchase(10, project(uuid.New())), newPurchase(5, project(uuid.New()))
	b.produce(t,
		record(t, seen.envelope(contract.StatusActive, 1)),
		snapshot(t, seen.envelope(contract.StatusActive, 1)),   // stale: at the version applied
		snapshot(t, unseen.envelope(contract.StatusActive, 1)), // fresh to the guard, skipped by Apply
		record(t, seen.envelope(contract.StatusCancelled, 2)),
		snapshot(t, seen.envelope(contract.StatusCancelled, 2)), // an --include-ended run
		record(t, unseen.envelope(contract.StatusExpired, 2)))
	testbed.Eventually(t, func() error {
		if n := testbed.Metric(t, reg, "pin_consumer_consumed_total").GetCounter().GetValue(); n < 6 {
			return fmt.Errorf("consumed %v of 6 records", n)
		}
		return nil
	})

	var got []string
	require.NoError(t, b.db.Gorm.Raw(`SELECT purchase_id || ' ' || status FROM notification_outbox ORDER BY status`).Scan(&got).Error)
	require.ElementsMatch(t, []string{seen.id.String() + " Active", seen.id.String() + " Cancelled", unseen.id.String() + " Expired"}, got)
}

// TestConsumingTheEventShowsTheNotifier keeps the documentation's
// notifications consumer the one the test above runs.
func TestConsumingTheEventShowsTheNotifier(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("notifications_test.go")
	require.NoError(t, err)
	start := strings.Index(string(src), "func (notifier) Apply(")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(string(src[start:]), "\n}\n")
	require.Greater(t, end, 0)
	doc, err := os.ReadFile("../../docs/consuming-the-event.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), string(src[start:start+end+2]),
		"docs/consuming-the-event.md must show notifier.Apply of modules/boost/notifications_test.go as it is")
}
