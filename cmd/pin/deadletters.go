package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/deadletter"
)

// The operator commands (`pin outbox dead-letters`, `pin promotion poison`,
// `pin consumer dead-letters`) share their shape: nested subcommands, one
// JSON object a line on stdout, IDs or an explicit --all, exit 1 when a
// named thing does not exist, 2 on a bad command line.

// deadLetterID parses a dead letter's id: a positive integer, the id of list.
func deadLetterID(arg string) (int64, bool) {
	id, err := strconv.ParseInt(arg, 10, 64)
	return id, err == nil && id > 0
}

const deadLetterIDWhat = "a dead letter ID (a positive integer, the id of list)"

// deadLetterSide is one side's dead letters (the outbox's, the consumer
// kit's) as the `dead-letters` commands see them: what the list is called,
// the flag that narrows it (--topic or --group), and the side's list,
// discard and replays. Both sides run the one command path below, over the
// one administration of platform/deadletter. T is a listed dead letter, R
// what a replay of one prints; stderr carries a replaying handler's log.
type deadLetterSide[T, R any] struct {
	command, what           string // "outbox dead-letters", "outbox dead letters"
	filterFlag, filterUsage string
	list                    func(ctx context.Context, db *sql.DB, filter string, limit int, discarded bool) ([]T, error)
	discard                 func(ctx context.Context, db *sql.DB, ids []int64, reason string) ([]T, error)
	replay                  func(ctx context.Context, db *sql.DB, ids []int64, stderr io.Writer) ([]R, error)
	replayAll               func(ctx context.Context, db *sql.DB, filter string, stderr io.Writer) ([]R, []deadletter.FailedReplay, error)
}

// commands is `dead-letters list|replay|discard` of the side.
func (d deadLetterSide[T, R]) commands() cli.Command {
	return cli.Group(d.command, map[string]cli.Command{
		"list":    d.runList,
		"replay":  d.runReplay,
		"discard": d.runDiscard,
	})
}

// runList runs `dead-letters list [--FILTER F] [--limit N] [--discarded]`:
// the waiting (or discarded) dead letters, oldest first, one JSON object a
// line, or "no …" on stderr.
func (d deadLetterSide[T, R]) runList(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	name := d.command + " list"
	fs := cli.NewFlags(name)
	filter := fs.String(d.filterFlag, "", d.filterUsage)
	limit := fs.Int("limit", 0, "list at most N, oldest first (0: all)")
	discarded := fs.Bool("discarded", false, "list the discarded dead letters, with their reasons, instead of those waiting")
	if err := cli.ParseFlags(fs, fmt.Sprintf("%s [--%s %s] [--limit N] [--discarded]", name, d.filterFlag, strings.ToUpper(d.filterFlag[:1])), args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if *limit < 0 {
		return cli.Usagef("%s: --limit %d must be 0 or more", name, *limit)
	}
	db, err := cli.OpenDatabase(ctx, environ)
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
	return cli.PrintList(stdout, stderr, letters, what)
}

// runDiscard runs `dead-letters discard ID... --reason TEXT`: all or
// nothing, each discarded one printed as list --discarded does.
func (d deadLetterSide[T, R]) runDiscard(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	ids, reason, err := parseDiscard(d.command+" discard", args, stdout)
	if err != nil {
		return err
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	discarded, err := d.discard(ctx, db, ids, reason)
	if err != nil {
		return err
	}
	return cli.PrintJSONLines(stdout, discarded)
}

// runReplay runs `dead-letters replay ID...|--all [--FILTER F]`: the named
// dead letters handed back, all or nothing, or with --all every one that
// can be, the others reported; one JSON line for each replayed.
func (d deadLetterSide[T, R]) runReplay(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	name := d.command + " replay"
	fs := cli.NewFlags(name)
	all := fs.Bool("all", false, fmt.Sprintf("replay every waiting dead letter (of --%s, if given) that can be replayed and report each one that cannot; required when no ID is named", d.filterFlag))
	filter := fs.String(d.filterFlag, "", "with --all: "+d.filterUsage)
	if err := cli.ParseFlags(fs, fmt.Sprintf("%s ID...|--all [--%s %s]", name, d.filterFlag, strings.ToUpper(d.filterFlag[:1])), args, stdout); err != nil {
		return err
	}
	ids, err := cli.NamedOrAll(name, deadLetterIDWhat, fs.Args(), *all, deadLetterID)
	if err != nil {
		return err
	}
	if *filter != "" && !*all {
		return cli.Usagef("%s: --%s goes with --all", name, d.filterFlag)
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	if *all {
		replayed, failed, err := d.replayAll(ctx, db, *filter, stderr)
		if err != nil {
			return err
		}
		return reportReplayAll(stdout, stderr, replayed, failed)
	}
	replayed, err := d.replay(ctx, db, ids, stderr)
	if err != nil {
		return err
	}
	return cli.PrintJSONLines(stdout, replayed)
}

// parseDiscard reads `dead-letters discard ID... --reason TEXT`: at least
// one id, and a reason that is not blank (it is kept with the dead letter).
func parseDiscard(name string, args []string, stdout io.Writer) ([]int64, string, error) {
	fs := cli.NewFlags(name)
	reason := fs.String("reason", "", "why they are discarded (required): kept with each, shown by list --discarded")
	named, err := cli.ParseFlagsAmongArgs(fs, name+" ID... --reason TEXT", args, stdout)
	if err != nil {
		return nil, "", err
	}
	ids, err := cli.NamedOrAll(name, deadLetterIDWhat, named, false, deadLetterID)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(*reason) == "" {
		return nil, "", cli.Usage(name + ": --reason is required: say why, it is kept with each dead letter")
	}
	return ids, *reason, nil
}

// reportReplayAll prints what a `replay --all` replayed on stdout and each
// dead letter it could not on stderr (id and why). It fails only when
// nothing could be done: dead letters were there and none was replayed.
func reportReplayAll[R any](stdout, stderr io.Writer, replayed []R, failed []deadletter.FailedReplay) error {
	if len(replayed) == 0 && len(failed) == 0 {
		fmt.Fprintln(stderr, "no dead letters to replay")
		return nil
	}
	if err := cli.PrintJSONLines(stdout, replayed); err != nil {
		return err
	}
	for _, f := range failed {
		fmt.Fprintf(stderr, "pin: dead letter %d not replayed: %s\n", f.ID, f.Reason)
	}
	if len(replayed) == 0 {
		return fmt.Errorf("replay --all: none of the %d dead letters could be replayed (each is named above; `dead-letters discard ID... --reason` sets aside one that never will)", len(failed))
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "pin: replayed %d, %d not\n", len(replayed), len(failed))
	}
	return nil
}
