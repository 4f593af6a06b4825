package host_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/testbed"
)

func TestRunCleanerRunsEveryIntervalAndSurvivesAFailedRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testbed.LogBuffer{}
		ctx, cancel := context.WithCancel(t.Context())
		var rounds []time.Duration
		start := time.Now()
		done := make(chan error)
		go func() {
			done <- host.RunCleaner(ctx, time.Minute, slog.New(slog.NewJSONHandler(logs, nil)), "test retention", func(context.Context) (int64, error) {
				rounds = append(rounds, time.Since(start))
				if len(rounds) == 2 {
					return 0, errors.New("database blip")
				}
				return 3, nil
			})
		}()
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, []time.Duration{0, time.Minute, 2 * time.Minute}, rounds)
		require.Contains(t, logs.String(), `"msg":"test retention failed"`)
		require.Contains(t, logs.String(), `"msg":"test retention deleted old rows"`)
	})
}
