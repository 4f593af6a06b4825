// Package outbox publishes integration events through a transactional
// outbox: a use case inserts its events into the outbox table of their Kafka
// topic inside its own database transaction (Publisher), and a background
// runner (Relay) sends committed rows to Kafka, at least once and in order
// per key, and marks each one acknowledged. One relay per topic is active at
// a time, elected through a PostgreSQL advisory lock. Rows nobody can
// publish end in a dead-letter table; acknowledged rows are deleted after a
// retention period (RetentionCleaner). See docs/adr/0008-outbox-relay.md and
// docs/event-pipeline.md.
//
// Rows live in outbox.messages, one table partitioned by topic (migration
// 00012, docs/adr/0024-the-outbox-owns-its-table.md); every statement of
// the relay and the dead-letter commands on it is in internal/store. They
// are written only through outbox.publish (write.go) and sent by
// watermill-kafka's publisher.
package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// Schema is the PostgreSQL schema of the outbox tables.
const Schema = "outbox"

// DeadLetterTable holds the messages the relay gave up on.
const DeadLetterTable = store.DeadLetters

// MessagesTable is the outbox table, partitioned by topic: read a topic's
// rows with WHERE topic = $1.
const MessagesTable = store.Messages

var (
	// Kafka's legal topic characters; watermill-sql accepts these too.
	validTopic   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	nonTableChar = regexp.MustCompile(`[^a-z0-9]+`)
)

// tableBase turns a Kafka topic into its table's name, as the database's
// outbox.topic_table does, for checkTopic:
// pin.promotion.purchase-changed.v1 -> pin_promotion_purchase_changed_v1.
func tableBase(topic string) string {
	return nonTableChar.ReplaceAllString(strings.ToLower(topic), "_")
}

// checkTopic rejects a topic that cannot name an outbox table.
func checkTopic(topic string) error {
	if !validTopic.MatchString(topic) {
		return fmt.Errorf("outbox: topic %q: only letters, digits, '.', '_' and '-' are allowed", topic)
	}
	if len(tableBase(topic)) > 63 {
		return fmt.Errorf("outbox: topic %q is too long for a table name", topic)
	}
	return nil
}

// EnsureTopics makes each topic's table in outbox.messages from the one
// definition (the database's outbox.create_topic), unless it has one, in
// one statement: a topic Kafka would not take, or whose table name is
// another topic's, is refused and none is made. `pin migrate up` calls it
// with the topics the modules declare; the relay only checks (Run).
func EnsureTopics(ctx context.Context, db *sql.DB, topics ...string) error {
	for _, t := range topics {
		if err := checkTopic(t); err != nil {
			return err
		}
	}
	return store.EnsureTopics(ctx, db, topics)
}
