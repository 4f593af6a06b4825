package domain

import (
	"fmt"

	"github.com/google/uuid"
)

// Target is one thing a purchase promotes: a logical reference into the
// context that owns it (catalog or news). It is a comparable value object,
// so two targets are the same target exactly when they are ==.
type Target struct {
	kind TargetKind
	id   uuid.UUID
}

// TargetRef is an unvalidated target as a caller supplies it; NewPurchase
// turns each into a Target and names the failing index when one is wrong.
type TargetRef struct {
	Kind TargetKind
	ID   uuid.UUID
}

// NewTarget returns the target, or a validation error when the kind is
// unknown or the id is the nil UUID.
func NewTarget(kind TargetKind, id uuid.UUID) (Target, error) {
	var errs fieldErrors
	validateTarget(kind, id, "", &errs)
	if err := errs.err("invalid promotion target"); err != nil {
		return Target{}, err
	}
	return Target{kind: kind, id: id}, nil
}

// validateTarget records the rules a target breaks under the given field
// prefix ("targets[2]." or "").
func validateTarget(kind TargetKind, id uuid.UUID, prefix string, errs *fieldErrors) {
	if !kind.IsValid() {
		errs.add(prefix+"targetKind", "unknown target kind %q (want one of %v)", kind, TargetKinds)
	}
	if id == uuid.Nil {
		errs.add(prefix+"targetId", "must not be the nil UUID")
	}
}

// Kind returns what kind of thing is promoted.
func (t Target) Kind() TargetKind { return t.kind }

// ID returns the target's id in its owning context.
func (t Target) ID() uuid.UUID { return t.id }

// String renders the target for logs and messages.
func (t Target) String() string { return fmt.Sprintf("%s:%s", t.kind, t.id) }
