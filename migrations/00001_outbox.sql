-- The transactional outbox (platform/outbox, docs/adr/0002-outbox.md).
--
-- One messages table per Kafka topic, in the shape watermill-sql's
-- DefaultPostgreSQLSchema generates, and the offsets table of its
-- DefaultPostgreSQLOffsetsAdapter; the service never lets watermill create
-- them at run time (AutoInitializeSchema stays off), so the column lists below
-- must stay identical to watermill's — platform/outbox has a test comparing
-- them with what watermill would create.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS outbox;

-- Messages for Kafka topic pin.promotion.purchase-changed.v1. Each row's
-- payload is the forwarder envelope (destination topic, message id, payload,
-- metadata). Rows are read in (transaction_id, "offset") order.
CREATE TABLE outbox."pin_promotion_purchase_changed_v1" (
	"offset" BIGSERIAL,
	"uuid" VARCHAR(36) NOT NULL,
	"created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
	"payload" JSON DEFAULT NULL,
	"metadata" JSON DEFAULT NULL,
	"transaction_id" xid8 NOT NULL,
	PRIMARY KEY ("transaction_id", "offset")
);

-- The retention cleaner deletes forwarded rows oldest first by created_at.
CREATE INDEX pin_promotion_purchase_changed_v1_created_at_idx
	ON outbox."pin_promotion_purchase_changed_v1" ("created_at");

-- Position of each consumer group (the forwarder uses one) in the table above.
CREATE TABLE outbox."pin_promotion_purchase_changed_v1_offsets" (
	consumer_group VARCHAR(255) NOT NULL,
	offset_acked BIGINT,
	last_processed_transaction_id xid8 NOT NULL,
	PRIMARY KEY(consumer_group)
);

-- Messages the forwarder gave up on after bounded retries (a poison message:
-- it can never be published, e.g. no partition key or too large). They are
-- kept for an operator; the forwarder moves on to the next message.
CREATE TABLE outbox.dead_letters (
	id BIGSERIAL PRIMARY KEY,
	-- Kafka topic the message was meant for.
	topic TEXT NOT NULL,
	-- The event's message id, when the envelope could be read.
	message_id TEXT,
	-- Position of the row in the messages table it came from.
	outbox_offset BIGINT NOT NULL,
	outbox_transaction_id xid8 NOT NULL,
	-- The outbox row as it was: forwarder envelope and watermill metadata.
	payload JSON,
	metadata JSON,
	error TEXT NOT NULL,
	attempts INTEGER NOT NULL,
	dead_lettered_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX dead_letters_topic_idx ON outbox.dead_letters (topic);

-- +goose Down
DROP TABLE IF EXISTS outbox.dead_letters;
DROP TABLE IF EXISTS outbox."pin_promotion_purchase_changed_v1_offsets";
DROP TABLE IF EXISTS outbox."pin_promotion_purchase_changed_v1";
DROP SCHEMA IF EXISTS outbox;
