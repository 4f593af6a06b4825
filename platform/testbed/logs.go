package testbed

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// LogBuffer is a log sink for JSON log lines (observability.NewLogger or
// slog.NewJSONHandler) that is safe for concurrent writers: a server or
// runner goroutine logs while the test reads.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// All returns every record written so far, in order. Every line must be a
// JSON record: a line that is not fails tb.
func (l *LogBuffer) All(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec map[string]any
		require.NoError(tb, json.Unmarshal([]byte(line), &rec), line)
		out = append(out, rec)
	}
	return out
}

// Records returns the records whose msg is msg, in order (see All).
func (l *LogBuffer) Records(tb testing.TB, msg string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, rec := range l.All(tb) {
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}
