//go:build production

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pinmarket/pin/platform/cli"
)

// dev is all of `pin dev` the production build carries: its help, and a
// line saying how to get it. The development step (dev.go, devdue.go) and
// its test broker are left out whole.
func dev(_ context.Context, args []string, _ []string, stdout io.Writer, _ io.Writer) error {
	return devLeftOut(args, stdout)
}

// devLeftOut answers `pin dev` in the production build, which leaves it out:
// its help (and make-due's) still exits 0 and says how to get it; running
// it is a usage error saying the same.
func devLeftOut(args []string, stdout io.Writer) error {
	const how = "dev: not in this build (built with -tags production, as the container image is); build a binary with it: make build, or go build ./cmd/pin"
	if len(args) > 0 && args[0] == "make-due" {
		args = args[1:]
	}
	if len(args) > 0 && cli.IsHelp(args[0]) {
		fmt.Fprintf(stdout, "Usage: pin dev\n\n%s\n", how)
		return cli.ErrHelpShown
	}
	return cli.Usage(how)
}
