package postgres

import (
	"context"
	"errors"
	"time"

	gormlogger "gorm.io/gorm/logger"
)

// quietLogger passes to GORM's slog logger only the statements it would
// log at Warn: errors and slow statements. GORM's own Trace renders every
// statement's SQL before it decides not to log it, which cost ~4 % of the
// API's CPU in the load benchmark (docs/performance.md).
type quietLogger struct {
	gormlogger.Interface
	slow time.Duration
}

func (l quietLogger) LogMode(level gormlogger.LogLevel) gormlogger.Interface {
	return quietLogger{Interface: l.Interface.LogMode(level), slow: l.slow}
}

func (l quietLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	failed := err != nil && !errors.Is(err, gormlogger.ErrRecordNotFound)
	if !failed && time.Since(begin) <= l.slow {
		return
	}
	l.Interface.Trace(ctx, begin, fc, err)
}
