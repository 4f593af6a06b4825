package promotion_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/internal/expiry"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/config"
)

// TestExpireSettingsTakeTheConfigDefaults: the expiry's defaults are the
// design document's and are written once, in platform/config; the module's
// mapping and the test-support fill read the same values.
func TestExpireSettingsTakeTheConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	got := promotion.ExpireSettingsOf(cfg)
	require.Equal(t, promotion.ExpireSettings{Interval: 60 * time.Second, BatchSize: 200, MaxBatchesPerCycle: 1,
		CycleBudget: 30 * time.Second, StopTimeout: 15 * time.Second}, got, "the design document's defaults, half of the 30s shutdown for a stop")
	require.Equal(t, got, promotiontest.ExpireSettings(expiry.ExpireSettings{MaxBatchesPerCycle: cfg.ExpireMaxBatchesPerCycle}))
}
