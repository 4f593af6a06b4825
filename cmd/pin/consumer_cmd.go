package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/observability"
)

// consumerDeadLetters are the consumer kit's dead letters (platform/consumer).
var consumerDeadLetters = deadLetterSide[consumer.DeadLetter]{
	command: "consumer dead-letters", what: "consumer dead letters",
	filterFlag: "group", filterUsage: "only the dead letters of this consumer (its Kafka consumer group, e.g. boost)",
	list: func(ctx context.Context, db *sql.DB, group string, limit int, discarded bool) ([]consumer.DeadLetter, error) {
		return consumer.ListDeadLetters(ctx, db, consumer.ListFilter{Group: group, Limit: limit, Discarded: discarded})
	},
	discard: consumer.DiscardDeadLetters,
}

// consumerCommand runs `pin consumer dead-letters list|replay|discard`: the
// consumer kit's dead letters, listed, handed to their consumer again or
// set aside, with only PIN_DATABASE_URL.
var consumerCommand = commandGroup("consumer", map[string]subcommand{
	"dead-letters": commandGroup("consumer dead-letters", map[string]subcommand{
		"list":    consumerDeadLetters.runList,
		"replay":  replayConsumerDeadLetters,
		"discard": consumerDeadLetters.runDiscard,
	}),
})

// consumerReplayers are the consumers this binary runs: only their dead
// letters can be replayed by it, since a replay runs the consumer's handler
// in this process (docs/consuming-the-event.md, "Dead letters").
func consumerReplayers(logger *slog.Logger) []consumer.Replayer {
	var replayers []consumer.Replayer
	for _, m := range modules() {
		if m.replayers != nil {
			replayers = append(replayers, m.replayers(logger)...)
		}
	}
	return replayers
}

// replayConsumerDeadLetters hands the named dead letters to their
// consumer's handler again, all or nothing, or with --all every one it can,
// reporting the others; it prints one JSON line for each replayed, with
// what became of it.
func replayConsumerDeadLetters(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "consumer dead-letters replay"
	fs := newFlags(name)
	all := fs.Bool("all", false, "replay every waiting dead letter (of --group, if given) that can be replayed and report each one that cannot; required when no ID is named")
	group := fs.String("group", "", "with --all: only the dead letters of this consumer")
	if err := parseFlags(fs, name+" ID...|--all [--group G]", args, stdout); err != nil {
		return err
	}
	ids, err := namedOrAll(name, deadLetterIDWhat, fs.Args(), *all, deadLetterID)
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
	if *all {
		replayed, failed, err := consumer.ReplayAllDeadLetters(ctx, db, replayers, *group)
		if err != nil {
			return err
		}
		return reportReplayAll(stdout, stderr, replayed, failed, func(f consumer.FailedReplay) (int64, string) { return f.ID, f.Reason })
	}
	replayed, err := consumer.ReplayDeadLetters(ctx, db, replayers, ids)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, replayed)
}
