package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/platform/config"
)

// The platform reads PIN_EXPIRE_* with defaults of its own (it imports no
// module); they must be the expiry job's, which the module applies.
func TestExpireEnvironmentDefaultsAreTheModules(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(nil, 0)
	require.NoError(t, err)
	require.Equal(t, promotion.DefaultExpireSettings(), promotion.ExpireSettings{
		Interval: cfg.ExpireInterval, BatchSize: cfg.ExpireBatchSize,
		MaxBatchesPerCycle: cfg.ExpireMaxBatchesPerCycle, CycleBudget: cfg.ExpireCycleBudget,
		StopTimeout: cfg.ShutdownTimeout / 2,
	})
}
