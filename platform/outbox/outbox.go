// Package outbox is the write API of the transactional outbox, the one room
// of it a module imports: a use case stores its events inside its own
// database transaction (Publisher.Prepare, whose value the module's own
// statement passes to the SQL function outbox.publish, or Publisher.Write),
// so an event is stored if and only if the change it describes commits.
//
// The outbox's other rooms change for other reasons and are the host's:
// package relay sends committed rows to Kafka (one leader per topic, at
// least once, in order per key), exports the metrics and keeps the
// retention; package deadletters is the operators' (list, replay, discard).
// Every statement on the outbox's tables is in internal/store. Rows live in
// outbox.messages, one table partitioned by topic (migration 00012). See
// docs/adr/0024-the-outbox-owns-its-table.md,
// docs/adr/0025-a-module-hands-the-outbox-values.md,
// docs/adr/0027-the-outbox-in-rooms.md and docs/event-pipeline.md.
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

// CheckTopic rejects a topic that cannot name an outbox table.
func CheckTopic(topic string) error {
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
		if err := CheckTopic(t); err != nil {
			return err
		}
	}
	return store.EnsureTopics(ctx, db, topics)
}
