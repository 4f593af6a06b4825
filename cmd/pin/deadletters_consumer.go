package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/consumer/deadletters"
	"github.com/pinmarket/pin/platform/deadletter"
	"github.com/pinmarket/pin/platform/observability"
)

// consumerDeadLetters are the consumer kit's dead letters
// (platform/consumer/deadletters): a replay hands each to its consumer's
// handler in this process.
var consumerDeadLetters = deadLetterSide[deadletters.DeadLetter, deadletters.Replayed]{
	command: "consumer dead-letters", what: "consumer dead letters",
	filterFlag: "group", filterUsage: "only the dead letters of this consumer (its Kafka consumer group, e.g. boost)",
	list: func(ctx context.Context, db *sql.DB, group string, limit int, discarded bool) ([]deadletters.DeadLetter, error) {
		return deadletters.List(ctx, db, deadletters.ListFilter{Group: group, Limit: limit, Discarded: discarded})
	},
	discard: deadletters.Discard,
	replay: func(ctx context.Context, db *sql.DB, ids []int64, stderr io.Writer) ([]deadletters.Replayed, error) {
		return deadletters.Replay(ctx, db, consumerReplayers(stderr), ids)
	},
	replayAll: func(ctx context.Context, db *sql.DB, group string, stderr io.Writer) ([]deadletters.Replayed, []deadletter.FailedReplay, error) {
		return deadletters.ReplayAll(ctx, db, consumerReplayers(stderr), group)
	},
}

// consumerCommand runs `pin consumer dead-letters list|replay|discard`: the
// consumer kit's dead letters, listed, handed to their consumer again or
// set aside, with only PIN_DATABASE_URL.
var consumerCommand = cli.Group("consumer", map[string]cli.Command{
	"dead-letters": consumerDeadLetters.commands(),
})

// consumerReplayers are the consumers this binary's modules run, logging on
// stderr: only their dead letters can be replayed by it, since a replay runs
// the consumer's handler in this process (docs/consuming-the-event.md, "Dead
// letters").
func consumerReplayers(stderr io.Writer) []consumer.Replayer {
	logger := observability.NewLogger(stderr, slog.LevelInfo)
	var replayers []consumer.Replayer
	for _, m := range modules() {
		if m.replayers != nil {
			replayers = append(replayers, m.replayers(logger)...)
		}
	}
	return replayers
}
