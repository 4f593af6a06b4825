package observability

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// WatermillLogger adapts logger for watermill: its chatty info logs (handler
// started, subscribing) become debug, and so do errors that are only the
// stop itself (context canceled), which are no failure to alert on.
func WatermillLogger(logger *slog.Logger) watermill.LoggerAdapter {
	return stopIsNoError{watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	})}
}

type stopIsNoError struct{ watermill.LoggerAdapter }

func (l stopIsNoError) Error(msg string, err error, fields watermill.LogFields) {
	if errors.Is(err, context.Canceled) {
		l.Debug(msg, fields.Add(watermill.LogFields{"error": err}))
		return
	}
	l.LoggerAdapter.Error(msg, err, fields)
}

func (l stopIsNoError) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return stopIsNoError{l.LoggerAdapter.With(fields)}
}
