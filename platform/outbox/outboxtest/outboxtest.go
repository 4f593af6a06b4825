// Package outboxtest runs the host's rooms of the outbox — the relay and the
// dead-letter administration — for a module's end-to-end tests, as the host
// and an operator would. A module may depend only on the outbox's write API
// (platform/archrules), its tests included: through this package a module's
// test sees its events leave for Kafka, or be dead-lettered and replayed,
// without building on the relay's or the administration's API.
package outboxtest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pinmarket/pin/platform/outbox/deadletters"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/testbed"
)

// ReasonTooLarge begins the error of a dead letter the broker refused as
// too large.
const ReasonTooLarge = relay.ReasonTooLarge

// Relay says which relay StartRelay runs.
type Relay struct {
	// Brokers and Topics are the relay's Kafka brokers and the topics it
	// relays, as the module declares them. Required.
	Brokers []string
	Topics  []string
	// PollInterval is the relay's pause after an empty read (20ms when 0).
	PollInterval time.Duration
	// Registerer and TracerProvider receive the relay's metrics and spans
	// (a registry and a no-op provider of the test's own when nil).
	Registerer     prometheus.Registerer
	TracerProvider trace.TracerProvider
}

// StartRelay runs the outbox relay over db until the test ends.
func StartRelay(tb testing.TB, db *sql.DB, r Relay) {
	tb.Helper()
	if r.PollInterval == 0 {
		r.PollInterval = 20 * time.Millisecond
	}
	if r.Registerer == nil {
		r.Registerer = prometheus.NewRegistry()
	}
	if r.TracerProvider == nil {
		r.TracerProvider = noop.NewTracerProvider()
	}
	outboxRelay, err := relay.New(db, relay.Config{Brokers: r.Brokers, Topics: r.Topics, PollInterval: r.PollInterval},
		slog.New(slog.DiscardHandler), r.Registerer, r.TracerProvider)
	require.NoError(tb, err)
	testbed.StartRunner(tb, outboxRelay)
}

// DeadLetter is one of the outbox's dead letters, as an operator lists it.
type DeadLetter = deadletters.DeadLetter

// WaitDeadLetters waits until topic has n dead letters waiting, and returns
// them, oldest first.
func WaitDeadLetters(tb testing.TB, db *sql.DB, topic string, n int) []DeadLetter {
	tb.Helper()
	var dead []DeadLetter
	testbed.Eventually(tb, func() error {
		var err error
		dead, err = deadletters.List(context.Background(), db, deadletters.ListFilter{Topic: topic})
		if err == nil && len(dead) != n {
			err = fmt.Errorf("%d dead letters, want %d", len(dead), n)
		}
		return err
	})
	return dead
}

// WaitHeld waits until topic's relay holds records records behind its dead
// letters and has nothing else left to send.
func WaitHeld(tb testing.TB, db *sql.DB, topic string, records int64) {
	tb.Helper()
	testbed.Eventually(tb, func() error {
		s, err := relay.ReadStatus(context.Background(), db, topic)
		if err == nil && (s.Held.Records != records || s.Backlog != 0) {
			err = fmt.Errorf("%d records held, %d in the backlog", s.Held.Records, s.Backlog)
		}
		return err
	})
}

// Replay replays the dead letters ids as `pin outbox dead-letters replay`
// does.
func Replay(tb testing.TB, db *sql.DB, ids ...int64) {
	tb.Helper()
	_, err := deadletters.Replay(context.Background(), db, ids)
	require.NoError(tb, err)
}
