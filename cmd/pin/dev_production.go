//go:build production

package main

import "errors"

// devIncluded is false in the production build: it links no test broker.
const devIncluded = false

func startDevBroker(string, ...string) (func(), error) {
	return nil, errors.New("dev: no embedded broker in the production build")
}
