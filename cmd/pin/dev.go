//go:build !production

package main

import "github.com/pinmarket/pin/platform/kafka"

// devIncluded says that `pin dev` and its embedded broker are in this
// build; the container image is built with -tags production, without them.
const devIncluded = true

func startDevBroker(addr string, topics ...string) (stop func(), err error) {
	return kafka.StartEmbedded(addr, topics...)
}
