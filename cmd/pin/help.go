package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// errHelpShown says that a command printed its help instead of running:
// the process exits 0, as `--help` is a request, not a mistake.
var errHelpShown = errors.New("help shown")

// newFlags is a command's flag set; parseFlags reports its errors and help.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs. On -h or --help it prints "Usage: pin
// synopsis" and the flags to stdout and returns errHelpShown, so a command
// such as serve never starts when only its help was asked for.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "Usage: pin %s\n", synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(stdout, "\nFlags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
		fmt.Fprintln(stdout, "\nConfiguration comes from the environment (PIN_*); see README.md.")
		return errHelpShown
	}
	if err != nil {
		return usageError{fs.Name() + ": " + err.Error()}
	}
	return nil
}

// noArgs parses the command line of a command that takes no arguments.
func noArgs(name, synopsis string, args []string, stdout io.Writer) error {
	fs := newFlags(name)
	if err := parseFlags(fs, synopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	return nil
}

// isHelp says whether arg asks for help, as the flag package understands it.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
