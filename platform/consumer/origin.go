package consumer

import (
	"errors"
	"fmt"

	"github.com/pinmarket/pin/platform/kafka"
)

// Origin says why a record was written: a change of the aggregate, or a
// re-publication of its current state. The kit reads it from the
// event_origin header (kafka.HeaderEventOrigin) into Event.Origin; handlers
// need not decode it.
type Origin uint8

const (
	// OriginTransition is a change of the aggregate: the header says
	// "transition", or the record has no such header (every record written
	// before the header existed).
	OriginTransition Origin = iota
	// OriginSnapshot is the aggregate's current state published again, with
	// the version it already had: a projection applies it under its version
	// guard like any event, a consumer that reacts to changes (one that
	// notifies) skips it.
	OriginSnapshot
)

// String returns the header value of o.
func (o Origin) String() string {
	if o == OriginSnapshot {
		return "snapshot"
	}
	return "transition"
}

// ErrUnknownOrigin is wrapped by OriginOf's error for a kafka.HeaderEventOrigin
// value the kit does not know. The runner dead-letters such a record:
// neither applying it as a change (a consumer might notify twice) nor
// dropping it is safe, and `pin consumer dead-letters replay` hands it back
// once the consumer knows the new origin.
var ErrUnknownOrigin = errors.New("unknown event origin")

// OriginOf reads r's origin: OriginTransition when the header is absent or
// "transition", OriginSnapshot when it is "snapshot", and an error wrapping
// ErrUnknownOrigin for any other value, the empty one included.
func OriginOf(r Record) (Origin, error) {
	v, ok := r.Headers[kafka.HeaderEventOrigin]
	switch {
	case !ok || v == "transition":
		return OriginTransition, nil
	case v == "snapshot":
		return OriginSnapshot, nil
	}
	return OriginTransition, fmt.Errorf("%w: %s header %q", ErrUnknownOrigin, kafka.HeaderEventOrigin, v)
}
