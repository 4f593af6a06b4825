package postgres

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// NewLogger returns the GORM logger the service uses: failing statements and
// statements slower than slow are written to logger, with their SQL and
// placeholders ($1) but never their parameter values, which carry user ids,
// idempotency keys, cancel reasons and event payloads.
func NewLogger(logger *slog.Logger, slow time.Duration) gormlogger.Interface {
	return quietLogger{slow: slow, Interface: gormlogger.NewSlogLogger(logger, gormlogger.Config{
		SlowThreshold:             slow,
		IgnoreRecordNotFoundError: true,
		ParameterizedQueries:      true,
		LogLevel:                  gormlogger.Warn,
	})}
}

// quietLogger passes to GORM's slog logger only the statements it would
// log at Warn: errors and slow statements. GORM's own Trace renders every
// statement's SQL before it decides not to log it, a visible share of the
// API's CPU under load (docs/performance.md).
type quietLogger struct {
	gormlogger.Interface
	slow time.Duration
}

var _ gorm.ParamsFilter = quietLogger{}

func (l quietLogger) LogMode(level gormlogger.LogLevel) gormlogger.Interface {
	return quietLogger{Interface: l.Interface.LogMode(level), slow: l.slow}
}

func (l quietLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if err != nil && (IsTransient(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller reports these, once per interval rather than once per
		// statement: during an outage every statement fails alike.
		return
	}
	failed := err != nil && !errors.Is(err, gormlogger.ErrRecordNotFound)
	if !failed && time.Since(begin) <= l.slow {
		return
	}
	l.Interface.Trace(ctx, begin, fc, err)
}

// ParamsFilter forwards to the wrapped logger: GORM looks for it on the
// outermost logger only, and without it ParameterizedQueries is ignored and
// every logged statement carries its values inline.
func (l quietLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, nil
}

// GORM's Scan logs through a recorder that ignores the logger's ParamsFilter
// and consults only this package-level hook; every logger of this service
// is parameterized, so the hook drops the values too.
func init() {
	gormlogger.RecorderParamsFilter = func(_ context.Context, sql string, _ ...any) (string, []any) {
		return sql, nil
	}
}
