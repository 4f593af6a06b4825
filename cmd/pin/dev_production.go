//go:build production

package main

import (
	"context"
	"io"
)

// dev is all of `pin dev` the production build carries: its help, and a
// line saying how to get it. The development step (dev.go, devdue.go) and
// its test broker are left out whole.
func dev(_ context.Context, args []string, _ []string, stdout io.Writer, _ io.Writer) error {
	return devLeftOut(args, stdout)
}
