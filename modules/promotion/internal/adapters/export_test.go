package adapters

// SaveTransition exposes the version-guarded write to the tests: through
// UpdatePurchase, which locks the row first, the guard never trips.
var SaveTransition = (*PurchaseRepository).saveTransition
