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
// Rows are laid out and acknowledged by watermill-sql's queue schema,
// written only by this package's one insert (write.go), and sent by
// watermill-kafka's publisher.
package outbox

import (
	"fmt"
	"regexp"
	"strings"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
)

// Schema is the PostgreSQL schema of the outbox tables.
const Schema = "outbox"

// DeadLetterTable holds the messages the relay gave up on.
const DeadLetterTable = `outbox.dead_letters`

var (
	// Kafka's legal topic characters; watermill-sql accepts these too.
	validTopic   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	nonTableChar = regexp.MustCompile(`[^a-z0-9]+`)
)

// tableBase turns a Kafka topic into the outbox table's unquoted name:
// pin.promotion.purchase-changed.v1 -> pin_promotion_purchase_changed_v1.
// Each Kafka topic has its own table (and relay), so one slow or blocked
// topic never holds back another.
func tableBase(topic string) string {
	return nonTableChar.ReplaceAllString(strings.ToLower(topic), "_")
}

// TableName is the quoted, schema-qualified outbox table of a Kafka topic.
func TableName(topic string) string {
	return fmt.Sprintf(`%s."%s"`, Schema, tableBase(topic))
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

// SchemaAdapter is the watermill-sql schema of the outbox tables: one row per
// message, the event as it goes on the wire in payload, the Kafka key and
// headers in metadata, and an acked flag. The tables are created by the
// owning module's migrations (SchemaInitializingQueries shows their shape),
// never by watermill at run time.
func SchemaAdapter(batchSize int) watermillsql.PostgreSQLQueueSchema {
	return watermillsql.PostgreSQLQueueSchema{
		GenerateMessagesTableName: TableName,
		SubscribeBatchSize:        batchSize,
	}
}

// OffsetsAdapter is the watermill-sql offsets adapter of the outbox tables:
// acknowledging marks rows acked (they stay for the retention period).
func OffsetsAdapter() watermillsql.PostgreSQLQueueOffsetsAdapter {
	return watermillsql.PostgreSQLQueueOffsetsAdapter{GenerateMessagesTableName: TableName}
}

// planNow has PostgreSQL plan a statement on an outbox table for the table
// as it is when the statement runs. pgx would prepare each statement once
// per session, and PostgreSQL keeps a prepared statement's plan until an
// ANALYZE of the table invalidates it (autovacuum's, when it is on). The
// relay's session lasts as long as its leadership, and the pool's about as
// long, so their first plan is made for an outbox that is empty or nearly: a
// sequential scan, which then walks every acknowledged row the retention
// keeps, on every read, many times a second (a 10k-event snapshot doubled
// the API's p99 that way). The relay's read and acknowledgement, the backlog
// gauge and the retention's delete go through it; planning costs tens of
// microseconds. See TestRelayReadsTheOutboxAsItIsNow.
func planNow(args []any) []any {
	return append([]any{pgx.QueryExecModeExec}, args...)
}
