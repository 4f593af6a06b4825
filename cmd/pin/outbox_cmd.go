package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/pinmarket/pin/platform/outbox"
)

const (
	outboxListSynopsis   = "outbox dead-letters list [--topic T]"
	outboxReplaySynopsis = "outbox dead-letters replay ID...|--all [--topic T]"
)

// outboxCommand runs `pin outbox dead-letters list|replay`: the relay's dead
// letters, listed or put back into the outbox, with only PIN_DATABASE_URL.
var outboxCommand = commandGroup("outbox", map[string]subcommand{
	"dead-letters": commandGroup("outbox dead-letters", map[string]subcommand{
		"list":   listOutboxDeadLetters,
		"replay": replayOutboxDeadLetters,
	}),
})

// listOutboxDeadLetters prints every dead letter (of --topic) as one JSON
// object a line, oldest first.
func listOutboxDeadLetters(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	fs := newFlags("outbox dead-letters list")
	topic := fs.String("topic", "", "only the dead letters of this Kafka topic")
	if err := parseFlags(fs, outboxListSynopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("outbox dead-letters list: unexpected argument %q", fs.Arg(0))}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	letters, err := outbox.ListDeadLetters(ctx, db, *topic)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, letters)
}

// replayOutboxDeadLetters puts the named dead letters, or with --all every
// replayable one, back into the outbox and prints one JSON line for each.
func replayOutboxDeadLetters(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	fs := newFlags("outbox dead-letters replay")
	all := fs.Bool("all", false, "replay every dead letter that can be replayed (of --topic, if given); required when no ID is named")
	topic := fs.String("topic", "", "with --all: only the dead letters of this Kafka topic")
	if err := parseFlags(fs, outboxReplaySynopsis, args, stdout); err != nil {
		return err
	}
	ids, err := namedOrAll("outbox dead-letters replay", "a dead letter ID (a positive integer, the id of list)", fs.Args(), *all,
		func(arg string) (int64, bool) {
			id, err := strconv.ParseInt(arg, 10, 64)
			return id, err == nil && id > 0
		})
	if err != nil {
		return err
	}
	if *topic != "" && !*all {
		return usageError{"outbox dead-letters replay: --topic goes with --all"}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	var replayed []outbox.ReplayedDeadLetter
	if *all {
		replayed, err = outbox.ReplayAllDeadLetters(ctx, db, *topic)
	} else {
		replayed, err = outbox.ReplayDeadLetters(ctx, db, ids)
	}
	if err != nil {
		return err
	}
	return printJSONLines(stdout, replayed)
}
