package relay

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
)

// TestDeadReasonTellsNeverFromNotNow: what no broker will ever take is
// dead-lettered with its reason, wrapped as watermill-kafka wraps it; a
// failure of the broker or the connection is no reason, and ends the round
// instead; only a broker's verdict on a record batch is tried again alone.
func TestDeadReasonTellsNeverFromNotNow(t *testing.T) {
	t.Parallel()
	// As watermill-kafka's Publish wraps Sarama's error.
	wrap := func(err error) error { return fmt.Errorf("cannot produce message %s: %w", "m-1", err) }
	for _, c := range []struct {
		name   string
		row    outboxRow
		err    error
		reason string
		alone  bool
	}{
		{"producer's limit", outboxRow{}, wrap(sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes")), ReasonTooLarge, false},
		{"payload left unread", outboxRow{bad: &outbox.MessageTooLargeError{MessageID: "m-1", Bytes: 2, Limit: 1}}, &outbox.MessageTooLargeError{MessageID: "m-1", Bytes: 2, Limit: 1}, ReasonTooLarge, false},
		{"broker: too large", outboxRow{}, wrap(sarama.ErrMessageSizeTooLarge), ReasonTooLarge, true},
		{"broker: batch too large", outboxRow{}, wrap(sarama.ErrMessageSetSizeTooLarge), ReasonTooLarge, true},
		{"broker: invalid record", outboxRow{}, wrap(sarama.ErrInvalidRecord), ReasonInvalid, true},
		{"broker: corrupt", outboxRow{}, wrap(sarama.ErrInvalidMessage), ReasonInvalid, true},
		{"no key", outboxRow{}, wrap(fmt.Errorf("message m-1: %w", kafka.ErrNoPartitionKey)), ReasonInvalid, false},
		{"no id", outboxRow{}, wrap(kafka.ErrNoMessageID), ReasonInvalid, false},
		{"unreadable metadata", outboxRow{bad: errors.New("metadata is not a JSON object of strings")}, errors.New("metadata is not a JSON object of strings"), ReasonInvalid, false},
		{"not the leader", outboxRow{}, wrap(sarama.ErrNotLeaderForPartition), "", false},
		{"not authorized", outboxRow{}, wrap(sarama.ErrTopicAuthorizationFailed), "", false},
		{"out of brokers", outboxRow{}, wrap(sarama.ErrOutOfBrokers), "", false},
		{"connection", outboxRow{}, wrap(io.EOF), "", false},
		{"sent", outboxRow{}, nil, "", false},
	} {
		require.Equal(t, c.reason, deadReason(c.row, c.err), c.name)
		require.Equal(t, c.alone, refusedBatch(c.err), c.name)
	}
}
