//go:build production

package conformance

// startVerifyBroker answers a run without Brokers in the production build,
// which leaves the embedded broker out.
func startVerifyBroker() (*verifyBroker, error) {
	return nil, ErrNoEmbeddedBroker
}
