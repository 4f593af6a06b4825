package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pinmarket/pin/platform/outbox"
)

const (
	outboxListSynopsis   = "outbox dead-letters list [--topic T] [--limit N] [--discarded]"
	outboxReplaySynopsis = "outbox dead-letters replay ID...|--all [--topic T]"
)

// outboxCommand runs `pin outbox dead-letters list|replay|discard`: the
// relay's dead letters, listed, put back into the outbox or set aside, with
// only PIN_DATABASE_URL.
var outboxCommand = commandGroup("outbox", map[string]subcommand{
	"dead-letters": commandGroup("outbox dead-letters", map[string]subcommand{
		"list":    listOutboxDeadLetters,
		"replay":  replayOutboxDeadLetters,
		"discard": discardOutboxDeadLetters,
	}),
})

// listOutboxDeadLetters prints the waiting (or --discarded) dead letters
// of --topic as one JSON object a line, oldest first.
func listOutboxDeadLetters(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "outbox dead-letters list"
	fs := newFlags(name)
	topic := fs.String("topic", "", "only the dead letters of this Kafka topic")
	lf := addListFlags(fs)
	if err := parseFlags(fs, outboxListSynopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	if err := lf.check(name); err != nil {
		return err
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	letters, err := outbox.ListDeadLetters(ctx, db, outbox.ListFilter{Topic: *topic, Limit: *lf.limit, Discarded: *lf.discarded})
	if err != nil {
		return err
	}
	what := "outbox dead letters"
	if *lf.discarded {
		what = "discarded outbox dead letters"
	}
	return printList(stdout, stderr, letters, what)
}

// replayOutboxDeadLetters puts the named dead letters back into the outbox,
// all or nothing, or with --all every one it can, reporting the others; it
// prints one JSON line for each replayed.
func replayOutboxDeadLetters(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "outbox dead-letters replay"
	fs := newFlags(name)
	all := fs.Bool("all", false, "replay every waiting dead letter that can be replayed (of --topic, if given) and report each one that cannot; required when no ID is named")
	topic := fs.String("topic", "", "with --all: only the dead letters of this Kafka topic")
	if err := parseFlags(fs, outboxReplaySynopsis, args, stdout); err != nil {
		return err
	}
	ids, err := namedOrAll(name, deadLetterIDWhat, fs.Args(), *all, deadLetterID)
	if err != nil {
		return err
	}
	if *topic != "" && !*all {
		return usageError{name + ": --topic goes with --all"}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	if *all {
		replayed, failed, err := outbox.ReplayAllDeadLetters(ctx, db, *topic)
		if err != nil {
			return err
		}
		return reportReplayAll(stdout, stderr, replayed, failed, func(f outbox.FailedReplay) (int64, string) { return f.ID, f.Reason })
	}
	replayed, err := outbox.ReplayDeadLetters(ctx, db, ids)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, replayed)
}

// discardOutboxDeadLetters sets the named dead letters aside with a reason,
// all or nothing, and prints each as list --discarded does.
func discardOutboxDeadLetters(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	ids, reason, err := parseDiscard("outbox dead-letters discard", args, stdout)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	discarded, err := outbox.DiscardDeadLetters(ctx, db, ids, reason)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, discarded)
}
