package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
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
// commands need, with sessions named "cli".
func openGormDatabase(ctx context.Context, environ []string) (*gorm.DB, error) {
	return openGormDatabaseAs(ctx, environ, "cli")
}

// openGormDatabaseAs is openGormDatabase with sessions named role
// (postgres.ApplicationName). GORM's statement lines are dropped: the
// command prints the error once, and an operator reads no SQL.
func openGormDatabaseAs(ctx context.Context, environ []string, role string) (*gorm.DB, error) {
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return nil, err
	}
	return postgres.OpenPool(ctx, cfg.DatabaseURL, postgres.PoolConfig{
		ApplicationName: postgres.ApplicationName(role),
		Logger:          slog.New(slog.DiscardHandler),
	})
}

// printList writes items as JSON lines on stdout, or, when there are none,
// says so on stderr ("no " + what), so an empty answer is never silence and
// stdout stays clean for scripts.
func printList[T any](stdout, stderr io.Writer, items []T, what string) error {
	if len(items) == 0 {
		fmt.Fprintf(stderr, "no %s\n", what)
		return nil
	}
	return printJSONLines(stdout, items)
}

// deadLetterID parses a dead letter's id: a positive integer, the id of list.
func deadLetterID(arg string) (int64, bool) {
	id, err := strconv.ParseInt(arg, 10, 64)
	return id, err == nil && id > 0
}

const deadLetterIDWhat = "a dead letter ID (a positive integer, the id of list)"

// deadLetterSide is one side's dead letters as the `dead-letters`
// commands see them: what the list is called, the flag that narrows it
// (--topic or --group), and its list and discard.
type deadLetterSide[T any] struct {
	command, what           string // "outbox dead-letters", "outbox dead letters"
	filterFlag, filterUsage string
	list                    func(ctx context.Context, db *sql.DB, filter string, limit int, discarded bool) ([]T, error)
	discard                 func(ctx context.Context, db *sql.DB, ids []int64, reason string) ([]T, error)
}

// runList runs `dead-letters list [--FILTER F] [--limit N] [--discarded]`:
// the waiting (or discarded) dead letters, oldest first, one JSON object a
// line, or "no …" on stderr.
func (d deadLetterSide[T]) runList(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	name := d.command + " list"
	fs := newFlags(name)
	filter := fs.String(d.filterFlag, "", d.filterUsage)
	limit := fs.Int("limit", 0, "list at most N, oldest first (0: all)")
	discarded := fs.Bool("discarded", false, "list the discarded dead letters, with their reasons, instead of those waiting")
	if err := parseFlags(fs, fmt.Sprintf("%s [--%s %s] [--limit N] [--discarded]", name, d.filterFlag, strings.ToUpper(d.filterFlag[:1])), args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	if *limit < 0 {
		return usageError{fmt.Sprintf("%s: --limit %d must be 0 or more", name, *limit)}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	letters, err := d.list(ctx, db, *filter, *limit, *discarded)
	if err != nil {
		return err
	}
	what := d.what
	if *discarded {
		what = "discarded " + what
	}
	return printList(stdout, stderr, letters, what)
}

// runDiscard runs `dead-letters discard ID... --reason TEXT`: all or
// nothing, each discarded one printed as list --discarded does.
func (d deadLetterSide[T]) runDiscard(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	ids, reason, err := parseDiscard(d.command+" discard", args, stdout)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	discarded, err := d.discard(ctx, db, ids, reason)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, discarded)
}

// parseDiscard reads `dead-letters discard ID... --reason TEXT`: at least
// one id, and a reason that is not blank (it is kept with the dead letter).
func parseDiscard(name string, args []string, stdout io.Writer) ([]int64, string, error) {
	fs := newFlags(name)
	reason := fs.String("reason", "", "why they are discarded (required): kept with each, shown by list --discarded")
	named, err := parseFlagsAmongArgs(fs, name+" ID... --reason TEXT", args, stdout)
	if err != nil {
		return nil, "", err
	}
	ids, err := namedOrAll(name, deadLetterIDWhat, named, false, deadLetterID)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(*reason) == "" {
		return nil, "", usageError{name + ": --reason is required: say why, it is kept with each dead letter"}
	}
	return ids, *reason, nil
}

// parseFlagsAmongArgs is parseFlags for a command whose flags may follow
// its arguments (discard 12 13 --reason "…"): the flag package stops at the
// first argument, so it parses again after each. It returns the arguments.
func parseFlagsAmongArgs(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) ([]string, error) {
	var named []string
	for {
		if err := parseFlags(fs, synopsis, args, stdout); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return named, nil
		}
		named, args = append(named, fs.Arg(0)), fs.Args()[1:]
	}
}

// reportReplayAll prints what a `replay --all` replayed on stdout and each
// dead letter it could not on stderr (id and why). It fails only when
// nothing could be done: dead letters were there and none was replayed.
func reportReplayAll[R, F any](stdout, stderr io.Writer, replayed []R, failed []F, describe func(F) (int64, string)) error {
	if len(replayed) == 0 && len(failed) == 0 {
		fmt.Fprintln(stderr, "no dead letters to replay")
		return nil
	}
	if err := printJSONLines(stdout, replayed); err != nil {
		return err
	}
	for _, f := range failed {
		id, reason := describe(f)
		fmt.Fprintf(stderr, "pin: dead letter %d not replayed: %s\n", id, reason)
	}
	if len(replayed) == 0 {
		return fmt.Errorf("replay --all: none of the %d dead letters could be replayed (each is named above; `dead-letters discard ID... --reason` sets aside one that never will)", len(failed))
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "pin: replayed %d, %d not\n", len(replayed), len(failed))
	}
	return nil
}
