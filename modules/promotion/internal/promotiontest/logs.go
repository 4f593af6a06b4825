package promotiontest

import "github.com/pinmarket/pin/platform/testbed"

// LogBuffer is testbed.LogBuffer: a concurrency-safe sink for JSON log lines.
type LogBuffer = testbed.LogBuffer
