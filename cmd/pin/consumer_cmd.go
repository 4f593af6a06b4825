package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/pinmarket/pin/modules/boost"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/observability"
)

// consumerCommand runs `pin consumer dead-letters list|replay`: the consumer
// kit's dead letters, listed or handed to their consumer again, with only
// PIN_DATABASE_URL.
var consumerCommand = commandGroup("consumer", map[string]subcommand{
	"dead-letters": commandGroup("consumer dead-letters", map[string]subcommand{
		"list":   listConsumerDeadLetters,
		"replay": replayConsumerDeadLetters,
	}),
})

// consumerReplayers are the consumers this binary runs: only their dead
// letters can be replayed by it, since a replay runs the consumer's handler
// in this process (docs/consuming-the-event.md, "Dead letters").
func consumerReplayers(logger *slog.Logger) []consumer.Replayer {
	return []consumer.Replayer{boost.DeadLetterReplayer(logger)}
}

// listConsumerDeadLetters prints every dead letter (of --group) as one JSON
// object a line, oldest first.
func listConsumerDeadLetters(ctx context.Context, args, environ []string, stdout, _ io.Writer) error {
	fs := newFlags("consumer dead-letters list")
	group := fs.String("group", "", "only the dead letters of this consumer (its Kafka consumer group, e.g. boost)")
	if err := parseFlags(fs, "consumer dead-letters list [--group G]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("consumer dead-letters list: unexpected argument %q", fs.Arg(0))}
	}
	db, err := openDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	letters, err := consumer.ListDeadLetters(ctx, db, *group)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, letters)
}

// replayConsumerDeadLetters hands the named dead letters, or with --all
// every replayable one, to their consumer's handler again and prints one
// JSON line for each, with what became of it.
func replayConsumerDeadLetters(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "consumer dead-letters replay"
	fs := newFlags(name)
	all := fs.Bool("all", false, "replay every dead letter that can be replayed (of --group, if given); required when no ID is named")
	group := fs.String("group", "", "with --all: only the dead letters of this consumer")
	if err := parseFlags(fs, name+" ID...|--all [--group G]", args, stdout); err != nil {
		return err
	}
	ids, err := namedOrAll(name, "a dead letter ID (a positive integer, the id of list)", fs.Args(), *all,
		func(arg string) (int64, bool) {
			id, err := strconv.ParseInt(arg, 10, 64)
			return id, err == nil && id > 0
		})
	if err != nil {
		return err
	}
	if *group != "" && !*all {
		return usageError{name + ": --group goes with --all"}
	}
	db, err := openGormDatabase(ctx, environ)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	replayers := consumerReplayers(observability.NewLogger(stderr, slog.LevelInfo))
	var replayed []consumer.ReplayedDeadLetter
	if *all {
		replayed, err = consumer.ReplayAllDeadLetters(ctx, db, replayers, *group)
	} else {
		replayed, err = consumer.ReplayDeadLetters(ctx, db, replayers, ids)
	}
	if err != nil {
		return err
	}
	return printJSONLines(stdout, replayed)
}
