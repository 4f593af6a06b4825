package outbox_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox"
)

// TestForwarderExportsItsCountersFromTheStart checks that the publish
// counters of every topic exist at 0 before anything was forwarded, so the
// first error is an increase the alerts and dashboards see.
func TestForwarderExportsItsCountersFromTheStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	_, err := outbox.NewForwarder(b.db.SQL, outbox.ForwarderConfig{Brokers: []string{"127.0.0.1:1"}, Topics: []string{topic}},
		b.logger, reg, noop.NewTracerProvider())
	require.NoError(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	found := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "pin_outbox_published_total" && f.GetName() != "pin_outbox_publish_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			require.Equal(t, topic, m.GetLabel()[0].GetValue(), f.GetName())
			require.Zero(t, m.GetCounter().GetValue(), f.GetName())
			found[f.GetName()] = true
		}
	}
	require.True(t, found["pin_outbox_published_total"], "published counter exported at 0")
	require.True(t, found["pin_outbox_publish_errors_total"], "publish errors counter exported at 0")
}
