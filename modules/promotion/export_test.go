package promotion

import "github.com/pinmarket/pin/modules/promotion/internal/adapters"

// NewPublishingTo is New with the purchase-changed event published to events
// instead of publications(): how a test declares a second topic, the way a
// contract-version migration adds one to publications().
func NewPublishingTo(d Deps, events adapters.Publications) (*Module, error) {
	return newModule(d, events)
}
