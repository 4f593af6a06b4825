// Package cli is what pin's commands share on the command line, the host's
// and the modules' alike: nested subcommands, flags whose --help exits 0, a
// bad command line reported as a UsageError (exit 2), one JSON object a
// line on stdout, IDs or an explicit --all, and the database opened from
// the environment with nothing else configured.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Command runs a command's remaining arguments; environ is the process's
// environment, the only configuration a command reads.
type Command func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error

// UsageError is a bad command line: pin reports it with exit code 2.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usage is a UsageError saying msg.
func Usage(msg string) error { return UsageError{msg} }

// Usagef is a UsageError saying what format and args make.
func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// ErrHelpShown says that a command printed its help instead of running:
// the process exits 0, as `--help` is a request, not a mistake.
var ErrHelpShown = errors.New("help shown")

// Group is the command name made of subs: it runs the subcommand its
// arguments start with. Its --help lists them and exits 0; a missing or
// unknown one is a usage error.
func Group(name string, subs map[string]Command) Command {
	names := slices.Sorted(maps.Keys(subs))
	want := strings.Join(names, " or ")
	return func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
		if len(args) > 0 && IsHelp(args[0]) {
			return ParseFlags(NewFlags(name), name+" "+strings.Join(names, "|"), args[:1], stdout)
		}
		if len(args) == 0 {
			return Usagef("%s: want %s", name, want)
		}
		sub, ok := subs[args[0]]
		if !ok {
			return Usagef("%s: unknown subcommand %q (want %s)", name, args[0], want)
		}
		return sub(ctx, args[1:], environ, stdout, stderr)
	}
}

// NewFlags is a command's flag set; ParseFlags reports its errors and help.
func NewFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// ParseFlags parses args into fs. On -h or --help it prints "Usage: pin
// synopsis" and the flags to stdout and returns ErrHelpShown, so a command
// such as serve never starts when only its help was asked for.
func ParseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) error {
	return ParseFlagsWithEnvironment(fs, synopsis, "", args, stdout)
}

// ParseFlagsWithEnvironment is ParseFlags for a command whose flags alone
// would say nothing of what it needs: its --help also prints environment,
// the variables it reads.
func ParseFlagsWithEnvironment(fs *flag.FlagSet, synopsis, environment string, args []string, stdout io.Writer) error {
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
		fmt.Fprint(stdout, environment)
		fmt.Fprintln(stdout, "\nConfiguration comes from the environment (PIN_*); see README.md, \"Configuration\".")
		return ErrHelpShown
	}
	if err != nil {
		return Usage(fs.Name() + ": " + err.Error())
	}
	return nil
}

// ParseFlagsAmongArgs is ParseFlags for a command whose flags may follow
// its arguments (discard 12 13 --reason "…"): the flag package stops at the
// first argument, so it parses again after each. It returns the arguments.
func ParseFlagsAmongArgs(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) ([]string, error) {
	var named []string
	for {
		if err := ParseFlags(fs, synopsis, args, stdout); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return named, nil
		}
		named, args = append(named, fs.Arg(0)), fs.Args()[1:]
	}
}

// NoArgs parses the command line of a command that takes no arguments.
func NoArgs(name, synopsis string, args []string, stdout io.Writer) error {
	return NoArgsWithEnvironment(name, synopsis, "", args, stdout)
}

// NoArgsWithEnvironment is NoArgs whose --help also prints environment (as
// ParseFlagsWithEnvironment).
func NoArgsWithEnvironment(name, synopsis, environment string, args []string, stdout io.Writer) error {
	fs := NewFlags(name)
	if err := ParseFlagsWithEnvironment(fs, synopsis, environment, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q", name, fs.Arg(0))
	}
	return nil
}

// IsHelp says whether arg asks for help, as the flag package understands it.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// NamedOrAll parses the IDs a replay or release names, each with parse
// (false: not an ID, described by what), and checks that IDs or --all are
// given, not both.
func NamedOrAll[T any](name, what string, args []string, all bool, parse func(string) (T, bool)) ([]T, error) {
	ids := make([]T, len(args))
	for i, arg := range args {
		id, ok := parse(arg)
		if !ok {
			return nil, Usagef("%s: %q is not %s", name, arg, what)
		}
		ids[i] = id
	}
	switch {
	case all && len(ids) > 0:
		return nil, Usage(name + ": name IDs or --all, not both")
	case !all && len(ids) == 0:
		return nil, Usage(name + ": name the IDs, or --all for every one")
	}
	return ids, nil
}

// StringList collects a repeatable flag.
type StringList []string

func (s *StringList) String() string     { return fmt.Sprint(*s) }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }
