package main

import (
	"context"
	"database/sql"
	"io"

	"github.com/pinmarket/pin/platform/outbox/deadletters"
)

const outboxReplaySynopsis = "outbox dead-letters replay ID...|--all [--topic T]"

// outboxDeadLetters are the relay's dead letters (platform/outbox).
var outboxDeadLetters = deadLetterSide[deadletters.DeadLetter]{
	command: "outbox dead-letters", what: "outbox dead letters",
	filterFlag: "topic", filterUsage: "only the dead letters of this Kafka topic",
	list: func(ctx context.Context, db *sql.DB, topic string, limit int, discarded bool) ([]deadletters.DeadLetter, error) {
		return deadletters.List(ctx, db, deadletters.ListFilter{Topic: topic, Limit: limit, Discarded: discarded})
	},
	discard: deadletters.Discard,
}

// outboxCommand runs `pin outbox dead-letters list|replay|discard`: the
// relay's dead letters, listed, put back into the outbox or set aside, with
// only PIN_DATABASE_URL.
var outboxCommand = commandGroup("outbox", map[string]subcommand{
	"dead-letters": commandGroup("outbox dead-letters", map[string]subcommand{
		"list":    outboxDeadLetters.runList,
		"replay":  replayOutboxDeadLetters,
		"discard": outboxDeadLetters.runDiscard,
	}),
})

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
		replayed, failed, err := deadletters.ReplayAll(ctx, db, *topic)
		if err != nil {
			return err
		}
		return reportReplayAll(stdout, stderr, replayed, failed, func(f deadletters.FailedReplay) (int64, string) { return f.ID, f.Reason })
	}
	replayed, err := deadletters.Replay(ctx, db, ids)
	if err != nil {
		return err
	}
	return printJSONLines(stdout, replayed)
}
