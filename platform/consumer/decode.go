package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// decode hands rec to the handler's Decode and sets aside a record that
// cannot be applied: skipped when Decode declines it (ErrSkip), dead-lettered
// when it fails or panics, so that no content of a record stops the runner.
// ok is false for a record set aside; an error means its dead letter could
// not be written (a database fault).
func (r *Runner[B]) decode(ctx context.Context, rec Record) (e Event[B], ok bool, err error) {
	e, err = r.decodeSafely(rec)
	switch {
	case err == nil:
		return e, true, nil
	case errors.Is(err, ErrSkip):
		r.logger.WarnContext(ctx, "record skipped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
			"error", err)
		r.count(ctx, outcomeSkipped, Event[B]{})
		return e, false, nil
	}
	return e, false, r.deadLetter(ctx, rec, err, 1)
}

// decodeSafely is Decode with a panic turned into its error, and the
// record's origin set: a decoder that panics on some bytes dead-letters that
// record instead of crashing the process on every delivery of it, and so
// does an origin the kit does not know (origin.go).
func (r *Runner[B]) decodeSafely(rec Record) (e Event[B], err error) {
	defer func() {
		if p := recover(); p != nil {
			e, err = Event[B]{}, fmt.Errorf("decode panicked: %v", p)
		}
	}()
	if e, err = r.handler.Decode(rec); err != nil {
		return e, err
	}
	if err := guardable(e); err != nil {
		return Event[B]{}, err
	}
	e.Origin, err = OriginOf(rec)
	return e, err
}

// ErrUnguardable is wrapped by the error of an event the inbox and the
// version guard cannot hold: a nil message id, no aggregate id, or a
// version below 1. Counted as stale, a version of 0 or -3 would vanish; the
// runner dead-letters the record with the rule it broke instead.
var ErrUnguardable = errors.New("event cannot be guarded")

// guardable checks what the kit itself relies on, whatever the handler's
// contract says.
func guardable[B any](e Event[B]) error {
	switch {
	case e.MessageID == uuid.Nil:
		return fmt.Errorf("%w: the message id must not be the nil UUID", ErrUnguardable)
	case e.AggregateID == "":
		return fmt.Errorf("%w: the aggregate id must not be empty", ErrUnguardable)
	case e.Version < 1:
		return fmt.Errorf("%w: the version must be at least 1, is %d", ErrUnguardable, e.Version)
	}
	return nil
}
