package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/kafka"
)

// Replayer is one consumer as a replay of its dead letters needs it (`pin
// consumer dead-letters replay`, package deadletters): its name and its
// handler, behind a face that does not depend on the handler's event type.
type Replayer interface {
	// Group is the consumer's name (Config.Name).
	Group() string
	// Replay applies rec as the consumer's runner would, inside tx (a
	// savepoint of it), and says what became of it: "applied",
	// "duplicate", "stale" or "skipped", and its message id.
	Replay(ctx context.Context, tx *gorm.DB, rec Record) (outcome string, messageID string, err error)
}

// NewReplayer is the Replayer of the consumer named group with handler: the
// same pair its Runner is built with.
func NewReplayer[B any](group string, handler Handler[B], logger *slog.Logger) Replayer {
	return replayer[B]{group: group, handler: handler, logger: logger}
}

type replayer[B any] struct {
	group   string
	handler Handler[B]
	logger  *slog.Logger
}

func (p replayer[B]) Group() string { return p.group }

// Replay runs the runner's own decode and apply, so a replayed record passes
// the same inbox and version guard as a delivered one.
func (p replayer[B]) Replay(ctx context.Context, tx *gorm.DB, rec Record) (string, string, error) {
	r := &Runner[B]{db: tx, cfg: Config{Name: p.group}, handler: p.handler, logger: p.logger}
	e, err := r.decodeSafely(rec)
	if errors.Is(err, ErrSkip) {
		return outcomeSkipped.String(), rec.Headers[kafka.HeaderMessageID], nil
	}
	if err != nil {
		return "", "", fmt.Errorf("still cannot be decoded: %w", err)
	}
	outs, err := r.apply(ctx, []Event[B]{e})
	if err != nil {
		return "", "", fmt.Errorf("apply: %w", err)
	}
	return outs[0].String(), e.MessageID.String(), nil
}
