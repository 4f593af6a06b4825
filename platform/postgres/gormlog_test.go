package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	gormlogger "gorm.io/gorm/logger"
)

// recordingLogger is a stand-in for GORM's logger in a unit test of pure
// logic: it records which statements reached it.
type recordingLogger struct {
	gormlogger.Interface
	traced *int
}

func (r recordingLogger) Trace(context.Context, time.Time, func() (string, int64), error) {
	*r.traced++
}

func TestQuietLoggerPassesOnlyErrorsAndSlowStatements(t *testing.T) {
	t.Parallel()
	var traced, rendered int
	l := quietLogger{slow: time.Second, Interface: recordingLogger{traced: &traced}}
	render := func() (string, int64) { rendered++; return "SELECT 1", 1 }

	l.Trace(context.Background(), time.Now(), render, nil)
	l.Trace(context.Background(), time.Now(), render, gormlogger.ErrRecordNotFound)
	require.Zero(t, traced, "fast statements and not-found are not logged")
	require.Zero(t, rendered, "nor is their SQL rendered")

	l.Trace(context.Background(), time.Now(), render, errors.New("boom"))
	l.Trace(context.Background(), time.Now().Add(-2*time.Second), render, nil)
	require.Equal(t, 2, traced, "errors and slow statements are")
}
