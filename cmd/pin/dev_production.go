//go:build production

package main

import (
	"context"
	"io"
)

// dev is all of `pin dev` the production build carries: a line saying how
// to get it. The development step (dev.go, devdue.go) and its test broker
// are left out whole.
func dev(context.Context, []string, []string, io.Writer, io.Writer) error {
	return usageError{"dev: not in this build (built with -tags production, as the container image is); build a binary with it: make build, or go build ./cmd/pin"}
}
