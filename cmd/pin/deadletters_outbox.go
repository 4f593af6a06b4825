package main

import (
	"context"
	"database/sql"
	"io"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/deadletter"
	"github.com/pinmarket/pin/platform/outbox/deadletters"
)

// outboxDeadLetters are the relay's dead letters
// (platform/outbox/deadletters): a replay puts each back into the outbox.
var outboxDeadLetters = deadLetterSide[deadletters.DeadLetter, deadletters.Replayed]{
	command: "outbox dead-letters", what: "outbox dead letters",
	filterFlag: "topic", filterUsage: "only the dead letters of this Kafka topic",
	list: func(ctx context.Context, db *sql.DB, topic string, limit int, discarded bool) ([]deadletters.DeadLetter, error) {
		return deadletters.List(ctx, db, deadletters.ListFilter{Topic: topic, Limit: limit, Discarded: discarded})
	},
	discard: deadletters.Discard,
	replay: func(ctx context.Context, db *sql.DB, ids []int64, _ io.Writer) ([]deadletters.Replayed, error) {
		return deadletters.Replay(ctx, db, ids)
	},
	replayAll: func(ctx context.Context, db *sql.DB, topic string, _ io.Writer) ([]deadletters.Replayed, []deadletter.FailedReplay, error) {
		return deadletters.ReplayAll(ctx, db, topic)
	},
}

// outboxCommand runs `pin outbox dead-letters list|replay|discard`: the
// relay's dead letters, listed, put back into the outbox or set aside, with
// only PIN_DATABASE_URL.
var outboxCommand = cli.Group("outbox", map[string]cli.Command{
	"dead-letters": outboxDeadLetters.commands(),
})
