//go:build production

package main

// startVerifyBroker answers `pin contract verify` without --brokers in the
// production build, which leaves the embedded broker out.
func startVerifyBroker() (*verifyBroker, error) {
	return nil, usageError{"contract verify: no embedded broker in this build (built with -tags production); give --brokers HOST:PORT, or build a binary with it: make build"}
}
