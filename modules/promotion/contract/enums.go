package contract

// The enums below are open: a later additive revision of the contract may add
// values. A consumer keeps a value it does not know as the string it received
// (Decode logs a warning) and Known reports false for it; only the producer
// is held to the values listed here (Validate).
//
// The module's domain keeps lists of its own (internal/domain/kinds.go), on
// purpose: these are what the wire promises, those what the module stores;
// a test of the module's event mapping holds them to the same values.

// Status is the status of a purchase after a transition.
type Status string

// Statuses of a purchase. Expired and Cancelled are terminal (INV-6).
const (
	// StatusPending is a purchase waiting for payment; with payment deferred
	// it is activated in the same operation, so no event carries it today.
	StatusPending Status = "Pending"
	// StatusActive is a running promotion.
	StatusActive Status = "Active"
	// StatusExpired is a promotion whose period ended.
	StatusExpired Status = "Expired"
	// StatusCancelled is a promotion cancelled by the buyer or an admin.
	StatusCancelled Status = "Cancelled"
)

// Known reports whether s is one of the statuses of contract version 1.
func (s Status) Known() bool {
	switch s {
	case StatusPending, StatusActive, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// PaymentStatus is the payment state of a purchase.
type PaymentStatus string

// Payment states. Only PaymentNotRequired occurs while payment is deferred
// (decision No. 10); the others are reserved for acquiring.
const (
	// PaymentNotRequired means no payment is taken.
	PaymentNotRequired PaymentStatus = "NotRequired"
	// PaymentPending means a payment is awaited.
	PaymentPending PaymentStatus = "Pending"
	// PaymentPaid means the purchase was paid.
	PaymentPaid PaymentStatus = "Paid"
	// PaymentRefunded means the payment was returned.
	PaymentRefunded PaymentStatus = "Refunded"
)

// Known reports whether s is one of the payment states of contract version 1.
func (s PaymentStatus) Known() bool {
	switch s {
	case PaymentNotRequired, PaymentPending, PaymentPaid, PaymentRefunded:
		return true
	}
	return false
}

// PackageKind is the kind of the package bought; each kind admits one target
// kind.
type PackageKind string

// Package kinds.
const (
	// KindProjectBoost promotes catalog projects (TargetProject).
	KindProjectBoost PackageKind = "ProjectBoost"
	// KindPropertyObjectBoost promotes catalog property objects
	// (TargetPropertyObject).
	KindPropertyObjectBoost PackageKind = "PropertyObjectBoost"
	// KindPostBoost promotes news posts (TargetPost).
	KindPostBoost PackageKind = "PostBoost"
)

// Known reports whether k is one of the package kinds of contract version 1.
func (k PackageKind) Known() bool {
	_, ok := admittedTargetKind[k]
	return ok
}

// admittedTargetKind is the one target kind each package kind admits; the
// producer never emits another combination.
var admittedTargetKind = map[PackageKind]TargetKind{
	KindProjectBoost:        TargetProject,
	KindPropertyObjectBoost: TargetPropertyObject,
	KindPostBoost:           TargetPost,
}

// TargetKind is the kind of a promoted object, which says which context owns
// it. A consumer filters targets by kind and ignores kinds it does not handle.
type TargetKind string

// Target kinds.
const (
	// TargetProject is a catalog project.
	TargetProject TargetKind = "Project"
	// TargetPropertyObject is a catalog property object.
	TargetPropertyObject TargetKind = "PropertyObject"
	// TargetPost is a news post.
	TargetPost TargetKind = "Post"
)

// Known reports whether k is one of the target kinds of contract version 1.
func (k TargetKind) Known() bool {
	switch k {
	case TargetProject, TargetPropertyObject, TargetPost:
		return true
	}
	return false
}
