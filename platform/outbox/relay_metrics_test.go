package outbox_test

import (
	"testing"
	"time"

	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestRelayExportsItsMetricsFromTheStart checks that the publish counters
// and the active gauge of every topic exist at 0 before anything was
// relayed, so the first error is an increase the alerts and dashboards see
// and a standby reads 0, not nothing.
func TestRelayExportsItsMetricsFromTheStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	_, err := relay.New(b.db.SQL, relay.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{topic}, PollInterval: time.Second},
		b.logger, reg, noop.NewTracerProvider())
	require.NoError(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	found := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "pin_outbox_published_total", "pin_outbox_publish_errors_total", "pin_outbox_unacknowledged_sends_total":
				require.Zero(t, m.GetCounter().GetValue(), f.GetName())
			case "pin_outbox_relay_active":
				require.Zero(t, m.GetGauge().GetValue(), f.GetName())
			default:
				continue
			}
			require.Equal(t, topic, m.GetLabel()[0].GetValue(), f.GetName())
			found[f.GetName()] = true
		}
	}
	require.Equal(t, map[string]bool{
		"pin_outbox_published_total": true, "pin_outbox_publish_errors_total": true, "pin_outbox_relay_active": true,
		"pin_outbox_unacknowledged_sends_total": true,
	}, found)
}
