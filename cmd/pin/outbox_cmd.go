package main

import (
	"context"
	"encoding/json"
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
func outboxCommand(ctx context.Context, args, environ []string, stdout io.Writer) error {
	const synopsis = "outbox dead-letters list|replay"
	if len(args) > 0 && isHelp(args[0]) {
		return parseFlags(newFlags("outbox"), synopsis, args[:1], stdout)
	}
	if len(args) == 0 || args[0] != "dead-letters" {
		return usageError{"outbox: the only subcommand is dead-letters (list or replay)"}
	}
	args = args[1:]
	if len(args) > 0 && isHelp(args[0]) {
		return parseFlags(newFlags("outbox dead-letters"), synopsis, args[:1], stdout)
	}
	if len(args) == 0 {
		return usageError{"outbox dead-letters: want list or replay"}
	}
	switch args[0] {
	case "list":
		return listOutboxDeadLetters(ctx, args[1:], environ, stdout)
	case "replay":
		return replayOutboxDeadLetters(ctx, args[1:], environ, stdout)
	default:
		return usageError{fmt.Sprintf("outbox dead-letters: unknown subcommand %q (want list or replay)", args[0])}
	}
}

// listOutboxDeadLetters prints every dead letter (of --topic) as one JSON
// object a line, oldest first.
func listOutboxDeadLetters(ctx context.Context, args, environ []string, stdout io.Writer) error {
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
func replayOutboxDeadLetters(ctx context.Context, args, environ []string, stdout io.Writer) error {
	fs := newFlags("outbox dead-letters replay")
	all := fs.Bool("all", false, "replay every dead letter that can be replayed (of --topic, if given); required when no ID is named")
	topic := fs.String("topic", "", "with --all: only the dead letters of this Kafka topic")
	if err := parseFlags(fs, outboxReplaySynopsis, args, stdout); err != nil {
		return err
	}
	ids := make([]int64, fs.NArg())
	for i, arg := range fs.Args() {
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || id < 1 {
			return usageError{fmt.Sprintf("outbox dead-letters replay: %q is not a dead letter ID (a positive integer, the id of list)", arg)}
		}
		ids[i] = id
	}
	switch {
	case *all && len(ids) > 0:
		return usageError{"outbox dead-letters replay: name IDs or --all, not both"}
	case !*all && len(ids) == 0:
		return usageError{"outbox dead-letters replay: name the IDs to replay, or --all to replay every one"}
	case *topic != "" && !*all:
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
