package contract_test

// Values no revision of the contract will ever add: a test that needs a value
// the code does not know names one of these, so adding a real value (say the
// status Paused) breaks none of them.
const (
	unknownStatus        = "NoSuchStatus"
	unknownPaymentStatus = "NoSuchPaymentStatus"
	unknownPackageKind   = "NoSuchPackageKind"
	unknownTargetKind    = "NoSuchTargetKind"
)
