-- The consumer kit's bookkeeping (platform/consumer, docs/consuming-the-event.md)
-- and the reference boost projection that uses it (modules/boost).
--
-- Every table of the kit is keyed by the consumer's name (its Kafka consumer
-- group), so several consumers of one database never see each other's rows.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS consumer;

-- Inbox: the messageId of every record a consumer took, written in the same
-- transaction as its effect, so a re-delivery is recognised and skipped.
-- Rows older than the inbox retention are deleted; the version guard below
-- still stops a re-delivery that comes later than that.
CREATE TABLE consumer.inbox (
	consumer text NOT NULL,
	message_id uuid NOT NULL,
	received_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (consumer, message_id)
);

CREATE INDEX inbox_received_at_idx ON consumer.inbox (consumer, received_at);

-- Version guard: the last version applied per aggregate (purchase). An event
-- whose version is not above it is stale and skipped.
CREATE TABLE consumer.aggregate_versions (
	consumer text NOT NULL,
	aggregate_id text NOT NULL,
	version bigint NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (consumer, aggregate_id)
);

-- Records a consumer could not decode, or whose handler kept failing, kept
-- whole for an operator; the partition moves on past them.
CREATE TABLE consumer.dead_letters (
	id bigserial PRIMARY KEY,
	consumer text NOT NULL,
	topic text NOT NULL,
	kafka_partition integer NOT NULL,
	kafka_offset bigint NOT NULL,
	record_key bytea,
	headers jsonb NOT NULL DEFAULT '{}',
	value bytea,
	error text NOT NULL,
	attempts integer NOT NULL,
	dead_lettered_at timestamptz NOT NULL DEFAULT now(),
	-- A record re-delivered after a crash is dead-lettered once.
	CONSTRAINT dead_letters_record_key UNIQUE (consumer, topic, kafka_partition, kafka_offset)
);

CREATE SCHEMA IF NOT EXISTS boost;

-- What each Active purchase contributes to each of its targets. An Active
-- event inserts its rows, an Expired or Cancelled one deletes them, so a
-- removal takes away exactly what was added.
CREATE TABLE boost.purchase_targets (
	purchase_id uuid NOT NULL,
	target_kind text NOT NULL,
	target_id uuid NOT NULL,
	boost_weight integer NOT NULL CHECK (boost_weight > 0),
	PRIMARY KEY (purchase_id, target_kind, target_id)
);

-- The projection: boost per target, maintained from purchase_targets in the
-- same transaction. A target without Active purchases has no row: the row a
-- removal brings to zero is deleted right after (found by the partial index).
CREATE TABLE boost.target_boosts (
	target_kind text NOT NULL,
	target_id uuid NOT NULL,
	boost_weight bigint NOT NULL CHECK (boost_weight >= 0),
	active_purchases integer NOT NULL CHECK (active_purchases >= 0),
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (target_kind, target_id)
);

CREATE INDEX target_boosts_emptied_idx ON boost.target_boosts (target_kind, target_id)
	WHERE active_purchases = 0;

-- +goose Down
DROP TABLE IF EXISTS boost.target_boosts;
DROP TABLE IF EXISTS boost.purchase_targets;
DROP SCHEMA IF EXISTS boost;
DROP TABLE IF EXISTS consumer.dead_letters;
DROP TABLE IF EXISTS consumer.aggregate_versions;
DROP TABLE IF EXISTS consumer.inbox;
DROP SCHEMA IF EXISTS consumer;
