package domain

// These enums are the domain's, and the event contract (contract/enums.go)
// lists the wire's: two lists on purpose. The domain names what the module
// stores and decides, the contract what version 1 promises to consumers,
// and neither package may import the other's concerns; adapters map value
// by value. TestDomainEnumsAreTheContracts holds the two to the same
// values, so a value added on one side only is a decision made there.

// Status is the lifecycle state of a PromotionPurchase:
// Pending -> Active -> Expired | Cancelled (Pending -> Cancelled too).
type Status string

// The statuses of a purchase. Expired and Cancelled are terminal (INV-6).
const (
	StatusPending   Status = "Pending"
	StatusActive    Status = "Active"
	StatusExpired   Status = "Expired"
	StatusCancelled Status = "Cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusPending, StatusActive, StatusExpired, StatusCancelled}

// IsValid reports whether s is one of the known statuses.
func (s Status) IsValid() bool {
	switch s {
	case StatusPending, StatusActive, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// IsTerminal reports whether no transition leaves s (INV-6).
func (s Status) IsTerminal() bool { return s == StatusExpired || s == StatusCancelled }

// PaymentStatus is where the payment of a purchase stands. In the current
// no-payment mode (decision No. 10) it is always NotRequired; the other
// values are reserved for the future acquiring integration.
type PaymentStatus string

// The payment statuses of a purchase.
const (
	PaymentNotRequired PaymentStatus = "NotRequired"
	PaymentPending     PaymentStatus = "Pending"
	PaymentPaid        PaymentStatus = "Paid"
	PaymentRefunded    PaymentStatus = "Refunded"
)

// PaymentStatuses lists every payment status.
var PaymentStatuses = []PaymentStatus{PaymentNotRequired, PaymentPending, PaymentPaid, PaymentRefunded}

// IsValid reports whether s is one of the known payment statuses.
func (s PaymentStatus) IsValid() bool {
	switch s {
	case PaymentNotRequired, PaymentPending, PaymentPaid, PaymentRefunded:
		return true
	}
	return false
}

// PackageKind says what a package promotes; each kind admits exactly one
// target kind.
type PackageKind string

// The kinds of promotion package.
const (
	PackageKindProjectBoost        PackageKind = "ProjectBoost"
	PackageKindPropertyObjectBoost PackageKind = "PropertyObjectBoost"
	PackageKindPostBoost           PackageKind = "PostBoost"
)

// PackageKinds lists every package kind.
var PackageKinds = []PackageKind{PackageKindProjectBoost, PackageKindPropertyObjectBoost, PackageKindPostBoost}

// IsValid reports whether k is one of the known package kinds.
func (k PackageKind) IsValid() bool {
	_, ok := k.AdmittedTargetKind()
	return ok
}

// AdmittedTargetKind returns the one target kind a purchase of this package
// kind may promote; ok is false for an unknown package kind.
func (k PackageKind) AdmittedTargetKind() (kind TargetKind, ok bool) {
	switch k {
	case PackageKindProjectBoost:
		return TargetKindProject, true
	case PackageKindPropertyObjectBoost:
		return TargetKindPropertyObject, true
	case PackageKindPostBoost:
		return TargetKindPost, true
	}
	return "", false
}

// TargetKind says what kind of thing a purchase promotes. Projects and
// property objects belong to the catalog context, posts to news.
type TargetKind string

// The kinds of promotion target.
const (
	TargetKindProject        TargetKind = "Project"
	TargetKindPropertyObject TargetKind = "PropertyObject"
	TargetKindPost           TargetKind = "Post"
)

// TargetKinds lists every target kind.
var TargetKinds = []TargetKind{TargetKindProject, TargetKindPropertyObject, TargetKindPost}

// IsValid reports whether k is one of the known target kinds.
func (k TargetKind) IsValid() bool {
	switch k {
	case TargetKindProject, TargetKindPropertyObject, TargetKindPost:
		return true
	}
	return false
}
