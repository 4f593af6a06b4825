package observability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/observability"
)

// TestWatermillLoggerLogsTheStopAtDebug: a subscriber's "Group consume
// error" caused by the stop is debug; any other error stays an ERROR.
func TestWatermillLoggerLogsTheStopAtDebug(t *testing.T) {
	var buf bytes.Buffer
	logger := observability.WatermillLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))).
		With(watermill.LogFields{"topic": "t"})
	logger.Error("Group consume error", fmt.Errorf("consume: %w", context.Canceled), nil)
	require.Contains(t, buf.String(), `"level":"DEBUG"`)
	require.NotContains(t, buf.String(), `"level":"ERROR"`)
	buf.Reset()
	logger.Error("Group consume error", errors.New("broker gone"), nil)
	require.Contains(t, buf.String(), `"level":"ERROR"`)
	require.Contains(t, buf.String(), `"topic":"t"`)
}
