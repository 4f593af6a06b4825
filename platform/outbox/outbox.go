// Package outbox publishes integration events through a transactional
// outbox: a use case inserts its events into an outbox table inside its own
// database transaction (Publisher), and a background runner (Forwarder)
// forwards committed rows to Kafka in order, at least once. Rows nobody can
// publish end in a dead-letter table; forwarded rows are deleted after a
// retention period (RetentionCleaner). See docs/adr/0002-outbox.md and
// docs/event-pipeline.md.
//
// It is built from watermill: watermill-sql's DefaultPostgreSQLSchema and
// DefaultPostgreSQLOffsetsAdapter for the tables, components/forwarder for
// the envelope that carries the destination topic, and watermill-kafka's
// publisher (Sarama) for Kafka, a poll's messages published at once.
package outbox

import (
	"fmt"
	"regexp"
	"strings"

	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/pinmarket/pin/platform/kafka"
)

// Metadata keys on outbox messages; the Kafka marshaler turns them into the
// record's key and headers (the message id header is the message UUID).
const (
	MetaPartitionKey    = kafka.MetaPartitionKey
	MetaEventType       = kafka.MetaEventType
	MetaContractVersion = kafka.MetaContractVersion
	MetaCorrelationID   = kafka.MetaCorrelationID
	MetaTraceparent     = kafka.MetaTraceparent
)

// ConsumerGroup is the watermill-sql consumer group of the forwarder. Every
// forwarder process shares it, so each row is forwarded by one of them.
const ConsumerGroup = "pin-outbox-forwarder"

// Schema is the PostgreSQL schema of the outbox tables.
const Schema = "outbox"

// DeadLetterTable holds the messages the forwarder gave up on.
const DeadLetterTable = `outbox.dead_letters`

// maxTableBase leaves room for the "_offsets" suffix within PostgreSQL's
// 63-byte identifiers.
const maxTableBase = 63 - len("_offsets")

var (
	// Kafka's legal topic characters; watermill-sql accepts these too.
	validTopic   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	nonTableChar = regexp.MustCompile(`[^a-z0-9]+`)
)

// tableBase turns a Kafka topic into the outbox table's unquoted name:
// pin.promotion.purchase-changed.v1 -> pin_promotion_purchase_changed_v1.
// Each Kafka topic has its own messages table (and forwarder subscription),
// so one slow or blocked topic never holds back another.
func tableBase(topic string) string {
	return nonTableChar.ReplaceAllString(strings.ToLower(topic), "_")
}

// TableName is the quoted, schema-qualified messages table of a Kafka topic.
func TableName(topic string) string {
	return fmt.Sprintf(`%s."%s"`, Schema, tableBase(topic))
}

// OffsetsTableName is the quoted, schema-qualified offsets table of a Kafka
// topic: the consumer group's acknowledged position in TableName(topic).
func OffsetsTableName(topic string) string {
	return fmt.Sprintf(`%s."%s_offsets"`, Schema, tableBase(topic))
}

// checkTopic rejects a topic that cannot name an outbox table.
func checkTopic(topic string) error {
	if !validTopic.MatchString(topic) {
		return fmt.Errorf("outbox: topic %q: only letters, digits, '.', '_' and '-' are allowed", topic)
	}
	if len(tableBase(topic)) > maxTableBase {
		return fmt.Errorf("outbox: topic %q is too long for a table name", topic)
	}
	return nil
}

// SchemaAdapter is the watermill-sql schema of the outbox tables. The
// tables are created by migrations, never by watermill at run time.
func SchemaAdapter(batchSize int) watermillsql.DefaultPostgreSQLSchema {
	return watermillsql.DefaultPostgreSQLSchema{
		GenerateMessagesTableName: TableName,
		SubscribeBatchSize:        batchSize,
	}
}

// OffsetsAdapter is the watermill-sql offsets adapter of the outbox tables.
func OffsetsAdapter() watermillsql.DefaultPostgreSQLOffsetsAdapter {
	return watermillsql.DefaultPostgreSQLOffsetsAdapter{
		GenerateMessagesOffsetsTableName: OffsetsTableName,
	}
}
