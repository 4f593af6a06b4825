package kafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatusConfigWaitsBriefly: `pin status` asks the broker for the
// consumer's lag with a client whose every network wait is 3 s at most and
// which asks for metadata once, so a broker that never answers costs the
// operator seconds, not the minute the admin defaults took.
func TestStatusConfigWaitsBriefly(t *testing.T) {
	t.Parallel()
	c := statusConfig(Security{})
	require.NoError(t, c.Validate())
	for name, d := range map[string]time.Duration{
		"Net.DialTimeout": c.Net.DialTimeout, "Net.ReadTimeout": c.Net.ReadTimeout, "Net.WriteTimeout": c.Net.WriteTimeout,
	} {
		require.LessOrEqual(t, d, 3*time.Second, name)
	}
	require.Zero(t, c.Metadata.Retry.Max, "metadata asked once")
}
