package outbox_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

func (b testBundle) backdate(tb testing.TB, uuidOf string, age time.Duration) {
	tb.Helper()
	res, err := b.db.SQL.Exec(`UPDATE outbox.messages
		SET created_at = created_at - make_interval(secs => $2)
		WHERE topic = $3 AND uuid = $1`, uuidOf, age.Seconds(), topic)
	require.NoError(tb, err)
	n, err := res.RowsAffected()
	require.NoError(tb, err)
	require.EqualValues(tb, 1, n)
}

func (b testBundle) outboxIDs(tb testing.TB) []string {
	tb.Helper()
	return b.strings(tb, `SELECT uuid FROM outbox.messages WHERE topic = $1 ORDER BY "offset"`, topic)
}

func TestRetentionDeletesOnlyOldForwardedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	const retention = 7 * 24 * time.Hour

	old := []string{}
	for seq := 1; seq <= 5; seq++ {
		m := event("p", seq)
		b.publish(t, m)
		old = append(old, m.UUID)
	}
	recent := event("p", 6)
	b.publish(t, recent)
	stop := b.startRelay(t, relay.Config{Brokers: brokers}, nil)
	newConsumer(t, brokers).until(t, 6)
	waitFor(t, "backlog to drain", func() bool { n, _, _ := b.stats(t); return n == 0 })
	stop()

	// Old and never forwarded: kept, however old.
	pending := event("p", 7)
	b.publish(t, pending)
	for _, id := range append(old, pending.UUID) {
		b.backdate(t, id, retention+time.Hour)
	}

	cleaner, err := relay.NewRetentionCleaner(b.db.SQL, relay.RetentionConfig{
		Topics: []string{topic}, Retention: retention, BatchSize: 2,
	}, b.logger)
	require.NoError(t, err)
	require.Equal(t, "outbox-retention", cleaner.Name())
	deleted, err := cleaner.CleanOnce(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, deleted, "in batches of 2")
	require.Equal(t, []string{recent.UUID, pending.UUID}, b.outboxIDs(t))

	deleted, err = cleaner.CleanOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, deleted)
}

func TestMetricsReportBacklogAgeAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	brokers := testbed.NewKafka(t, topic)
	reg := prometheus.NewRegistry()
	require.NoError(t, relay.RegisterMetrics(b.db.SQL, reg, relay.MetricsConfig{Topics: []string{topic}}))
	require.NoError(t, relay.RegisterMetrics(b.db.SQL, reg, relay.MetricsConfig{Topics: []string{topic}}), "idempotent")

	require.Zero(t, metricValue(t, reg, "pin_outbox_backlog_messages"))
	require.Zero(t, metricValue(t, reg, "pin_outbox_oldest_message_age_seconds"))

	first := event("p", 1)
	b.publish(t, first, event("p", 2), event("p", 3))
	b.backdate(t, first.UUID, 90*time.Second)
	require.Equal(t, 3.0, metricValue(t, reg, "pin_outbox_backlog_messages"))
	age := metricValue(t, reg, "pin_outbox_oldest_message_age_seconds")
	require.InDelta(t, 90, age, 30)

	// The relay registers the same collectors on the same registry.
	b.startRelay(t, relay.Config{Brokers: brokers}, reg)
	newConsumer(t, brokers).until(t, 3)
	waitFor(t, "backlog gauge to drop", func() bool {
		return metricValue(t, reg, "pin_outbox_backlog_messages") == 0
	})
	require.Zero(t, metricValue(t, reg, "pin_outbox_oldest_message_age_seconds"))
	require.Equal(t, 3.0, metricValue(t, reg, "pin_outbox_published_total"))
	require.Zero(t, metricValue(t, reg, "pin_outbox_publish_errors_total"))
	require.Zero(t, metricValue(t, reg, "pin_outbox_dead_letters"))

	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			require.Equal(t, "topic", m.GetLabel()[0].GetName(), f.GetName())
			require.Equal(t, topic, m.GetLabel()[0].GetValue(), f.GetName())
		}
	}
}
