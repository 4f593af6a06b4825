package consumer

import (
	"errors"
	"fmt"
)

// HeaderEventOrigin is the record header that says why the producer wrote
// the record: "transition" (or no such header) for a change of the
// aggregate, "snapshot" for a re-publication of its current state.
const HeaderEventOrigin = "event_origin"

// Origin says why a record was written. The kit reads it from the
// HeaderEventOrigin header into Event.Origin; handlers need not decode it.
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

// ErrUnknownOrigin is wrapped by OriginOf's error for a HeaderEventOrigin
// value the kit does not know. The runner dead-letters such a record:
// neither applying it as a change (a consumer might notify twice) nor
// dropping it is safe, and `pin consumer dead-letters replay` hands it back
// once the consumer knows the new origin.
var ErrUnknownOrigin = errors.New("unknown event origin")

// OriginOf reads r's origin: OriginTransition when the header is absent or
// "transition", OriginSnapshot when it is "snapshot", and an error wrapping
// ErrUnknownOrigin for any other value, the empty one included.
func OriginOf(r Record) (Origin, error) {
	v, ok := r.Headers[HeaderEventOrigin]
	switch {
	case !ok || v == "transition":
		return OriginTransition, nil
	case v == "snapshot":
		return OriginSnapshot, nil
	}
	return OriginTransition, fmt.Errorf("%w: %s header %q", ErrUnknownOrigin, HeaderEventOrigin, v)
}
