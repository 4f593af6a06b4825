-- The promotion module's outbox: the table of Kafka topic
-- pin.promotion.purchase-changed.v1, in the layout of watermill-sql's
-- PostgreSQLQueueSchema (platform/outbox, docs/adr/0008-outbox-relay.md).
-- The module owns it: it declares the topic (promotion.Module.OutboxTopics),
-- and the host runs the relay, retention and metrics of what it declares.
--
-- It replaces the table of the same name that 00001 created in the layout
-- of watermill-sql's DefaultPostgreSQLSchema (rows read by transaction id,
-- each event base64-encoded in watermill's forwarder envelope, a consumer
-- group position in a separate offsets table). Every row is carried over,
-- once, in the old commit order: the rows after the forwarder's position as
-- unacknowledged (the relay sends them), the others as acknowledged (kept
-- for retention and replays). Down restores the old layout the same way.

-- +goose Up
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" RENAME TO "pin_promotion_purchase_changed_v1_legacy";
ALTER INDEX outbox."pin_promotion_purchase_changed_v1_pkey" RENAME TO "pin_promotion_purchase_changed_v1_legacy_pkey";
ALTER INDEX outbox."pin_promotion_purchase_changed_v1_created_at_idx" RENAME TO "pin_promotion_purchase_changed_v1_legacy_created_at_idx";
ALTER SEQUENCE outbox."pin_promotion_purchase_changed_v1_offset_seq" RENAME TO "pin_promotion_purchase_changed_v1_legacy_offset_seq";

-- One row per message: the event as it goes on the wire (payload), its Kafka
-- key and headers (metadata, with uuid as the message_id header), and whether
-- the relay has sent it (acked). "offset" is the order of the insert, which
-- per purchase is the commit order (writers of a purchase serialise on its row).
CREATE TABLE outbox."pin_promotion_purchase_changed_v1" (
	"offset" BIGSERIAL PRIMARY KEY,
	"uuid" VARCHAR(36) NOT NULL,
	"payload" JSON DEFAULT NULL,
	"metadata" JSON DEFAULT NULL,
	"acked" BOOLEAN NOT NULL DEFAULT FALSE,
	"created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- The relay's read: unacknowledged rows in offset order.
CREATE INDEX pin_promotion_purchase_changed_v1_unacked_idx
	ON outbox."pin_promotion_purchase_changed_v1" ("offset") WHERE acked = false;

-- The retention cleaner deletes acknowledged rows oldest first.
CREATE INDEX pin_promotion_purchase_changed_v1_acked_created_at_idx
	ON outbox."pin_promotion_purchase_changed_v1" (created_at) WHERE acked;

INSERT INTO outbox."pin_promotion_purchase_changed_v1" (uuid, payload, metadata, acked, created_at)
SELECT m.payload->>'uuid',
	convert_from(decode(m.payload->>'payload', 'base64'), 'UTF8')::json,
	m.payload->'metadata',
	COALESCE((m.transaction_id, m."offset") <= (o.last_processed_transaction_id, COALESCE(o.offset_acked, 0)), false),
	m.created_at AT TIME ZONE 'UTC'
FROM outbox."pin_promotion_purchase_changed_v1_legacy" m
LEFT JOIN outbox."pin_promotion_purchase_changed_v1_offsets" o ON o.consumer_group = 'pin-outbox-forwarder'
ORDER BY m.transaction_id, m."offset";

DROP TABLE outbox."pin_promotion_purchase_changed_v1_legacy";
DROP TABLE outbox."pin_promotion_purchase_changed_v1_offsets";

-- Dead letters keep the event and its metadata plainly too; rows of the relay
-- have no transaction id.
ALTER TABLE outbox.dead_letters ALTER COLUMN outbox_transaction_id DROP NOT NULL;
UPDATE outbox.dead_letters
SET payload = convert_from(decode(payload->>'payload', 'base64'), 'UTF8')::json,
	metadata = payload->'metadata'
WHERE payload::jsonb ? 'destination_topic';

-- +goose Down
UPDATE outbox.dead_letters
SET payload = json_build_object(
		'destination_topic', topic,
		'uuid', message_id,
		'payload', translate(encode(convert_to(payload::text, 'UTF8'), 'base64'), E'\n', ''),
		'metadata', metadata),
	metadata = '{}',
	outbox_transaction_id = COALESCE(outbox_transaction_id, pg_current_xact_id())
WHERE payload IS NOT NULL AND NOT payload::jsonb ? 'destination_topic';
UPDATE outbox.dead_letters SET outbox_transaction_id = pg_current_xact_id() WHERE outbox_transaction_id IS NULL;
ALTER TABLE outbox.dead_letters ALTER COLUMN outbox_transaction_id SET NOT NULL;

ALTER TABLE outbox."pin_promotion_purchase_changed_v1" RENAME TO "pin_promotion_purchase_changed_v1_relay";
ALTER INDEX outbox."pin_promotion_purchase_changed_v1_pkey" RENAME TO "pin_promotion_purchase_changed_v1_relay_pkey";
ALTER INDEX outbox."pin_promotion_purchase_changed_v1_acked_created_at_idx" RENAME TO "pin_promotion_purchase_changed_v1_relay_created_at_idx";
ALTER SEQUENCE outbox."pin_promotion_purchase_changed_v1_offset_seq" RENAME TO "pin_promotion_purchase_changed_v1_relay_offset_seq";

CREATE TABLE outbox."pin_promotion_purchase_changed_v1" (
	"offset" BIGSERIAL,
	"uuid" VARCHAR(36) NOT NULL,
	"created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
	"payload" JSON DEFAULT NULL,
	"metadata" JSON DEFAULT NULL,
	"transaction_id" xid8 NOT NULL,
	PRIMARY KEY ("transaction_id", "offset")
);
CREATE INDEX pin_promotion_purchase_changed_v1_created_at_idx
	ON outbox."pin_promotion_purchase_changed_v1" ("created_at");
CREATE TABLE outbox."pin_promotion_purchase_changed_v1_offsets" (
	consumer_group VARCHAR(255) NOT NULL,
	offset_acked BIGINT,
	last_processed_transaction_id xid8 NOT NULL,
	PRIMARY KEY(consumer_group)
);

-- Acknowledged rows first, then the unacknowledged ones, each in offset order
-- (the order per purchase); the forwarder's position sits between the two.
INSERT INTO outbox."pin_promotion_purchase_changed_v1" (uuid, created_at, payload, metadata, transaction_id)
SELECT gen_random_uuid()::text, r.created_at AT TIME ZONE 'UTC',
	json_build_object(
		'destination_topic', 'pin.promotion.purchase-changed.v1',
		'uuid', r.uuid,
		'payload', translate(encode(convert_to(r.payload::text, 'UTF8'), 'base64'), E'\n', ''),
		'metadata', r.metadata),
	'{}', pg_current_xact_id()
FROM outbox."pin_promotion_purchase_changed_v1_relay" r
ORDER BY r.acked DESC, r."offset";

-- The table is new, so the acknowledged rows took offsets 1 to their count.
INSERT INTO outbox."pin_promotion_purchase_changed_v1_offsets" (consumer_group, offset_acked, last_processed_transaction_id)
SELECT 'pin-outbox-forwarder', count(*), pg_current_xact_id()
FROM outbox."pin_promotion_purchase_changed_v1_relay" WHERE acked;

DROP TABLE outbox."pin_promotion_purchase_changed_v1_relay";
