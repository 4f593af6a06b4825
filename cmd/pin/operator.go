package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/postgres"
)

// The operator commands (`pin outbox dead-letters`, `pin promotion poison`,
// `pin consumer dead-letters`) share their shape: nested subcommands, one
// JSON object a line on stdout, IDs or an explicit --all, exit 1 when a
// named thing does not exist, 2 on a bad command line.

// subcommand runs a command's remaining arguments.
type subcommand func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error

// commandGroup is the command name made of subs: it runs the subcommand
// its arguments start with. Its --help lists them and exits 0; a missing or
// unknown one is a usage error.
func commandGroup(name string, subs map[string]subcommand) subcommand {
	names := slices.Sorted(maps.Keys(subs))
	want := strings.Join(names, " or ")
	return func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
		if len(args) > 0 && isHelp(args[0]) {
			return parseFlags(newFlags(name), name+" "+strings.Join(names, "|"), args[:1], stdout)
		}
		if len(args) == 0 {
			return usageError{fmt.Sprintf("%s: want %s", name, want)}
		}
		sub, ok := subs[args[0]]
		if !ok {
			return usageError{fmt.Sprintf("%s: unknown subcommand %q (want %s)", name, args[0], want)}
		}
		return sub(ctx, args[1:], environ, stdout, stderr)
	}
}

// namedOrAll parses the IDs a replay or release names, each with parse
// (false: not an ID, described by what), and checks that IDs or --all are
// given, not both.
func namedOrAll[T any](name, what string, args []string, all bool, parse func(string) (T, bool)) ([]T, error) {
	ids := make([]T, len(args))
	for i, arg := range args {
		id, ok := parse(arg)
		if !ok {
			return nil, usageError{fmt.Sprintf("%s: %q is not %s", name, arg, what)}
		}
		ids[i] = id
	}
	switch {
	case all && len(ids) > 0:
		return nil, usageError{name + ": name IDs or --all, not both"}
	case !all && len(ids) == 0:
		return nil, usageError{name + ": name the IDs, or --all for every one"}
	}
	return ids, nil
}

// printJSONLines writes each item as one line of JSON, for jq.
func printJSONLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, item := range items {
		if err := enc.Encode(item); err != nil {
			return err
		}
	}
	return nil
}

// openGormDatabase opens PIN_DATABASE_URL, the only variable the operator
// commands need.
func openGormDatabase(ctx context.Context, environ []string) (*gorm.DB, error) {
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return nil, err
	}
	return postgres.Open(ctx, cfg.DatabaseURL)
}
