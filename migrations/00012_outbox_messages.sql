-- The outbox owns its table (docs/adr/0024-the-outbox-owns-its-table.md).
--
-- outbox.messages is the one definition of an outbox row, in the layout of
-- watermill-sql's PostgreSQLQueueSchema plus the topic, partitioned by
-- topic: each Kafka topic keeps a table of its own (a partition, so one slow
-- or blocked topic never holds back another, and each is vacuumed and
-- pruned apart), and every statement names outbox.messages with a topic, so
-- it is written once, whole, whatever the topics. A topic's table is made by
-- outbox.create_topic, from its declaration in Go (`pin migrate`, `pin dev`);
-- rows go in only through outbox.publish, which a module's own statement
-- calls in a CTE so that a change and its events stay one statement.
--
-- The promotion module's table, made by 00001 and 00003, becomes the first
-- partition as it is: its rows, indexes and storage settings stay. Attaching
-- it builds its new primary key and checks its rows, under an exclusive lock
-- on that table only: a few seconds for a million rows.

-- +goose Up
-- One sequence for every topic: per topic, "offset" is still the insert
-- order, which is all the relay needs (the order of a key).
CREATE SEQUENCE outbox.messages_offset_seq AS bigint;

CREATE TABLE outbox.messages (
	"offset" BIGINT NOT NULL DEFAULT nextval('outbox.messages_offset_seq'),
	"uuid" VARCHAR(36) NOT NULL,
	"payload" JSON DEFAULT NULL,
	"metadata" JSON DEFAULT NULL,
	"acked" BOOLEAN NOT NULL DEFAULT FALSE,
	"created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
	"topic" TEXT NOT NULL,
	-- "offset" first: watermill-sql's acknowledgement names offsets only.
	PRIMARY KEY ("offset", "topic")
) PARTITION BY LIST ("topic");
ALTER SEQUENCE outbox.messages_offset_seq OWNED BY outbox.messages."offset";

-- The relay's read: a topic's unacknowledged rows in offset order. The
-- topic is in it because every read names one: without statistics (after a
-- restore or pg_upgrade) the planner takes "topic = $1" for a few rows, and
-- the primary key, which has the topic too, would otherwise win and walk
-- every acknowledged row (TestRelayStatementsPlanWithoutJIT).
CREATE INDEX messages_unacked_idx ON outbox.messages ("offset", "topic") WHERE acked = false;
-- The retention deletes a topic's acknowledged rows oldest first.
CREATE INDEX messages_acked_created_at_idx ON outbox.messages (created_at) WHERE acked;

-- outbox.topic_table is the name of a topic's table:
-- pin.promotion.purchase-changed.v1 -> pin_promotion_purchase_changed_v1.
CREATE FUNCTION outbox.topic_table(topic text) RETURNS text
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN regexp_replace(lower(topic), '[^a-z0-9]+', '_', 'g');

-- outbox.create_topic makes topic's table unless it has one, and returns it.
-- It refuses a topic Kafka would not take, and one whose table name is
-- another topic's.
-- +goose StatementBegin
CREATE FUNCTION outbox.create_topic(topic text) RETURNS regclass
	LANGUAGE plpgsql STRICT AS $$
DECLARE
	name text := outbox.topic_table(topic);
	existing regclass := to_regclass(format('outbox.%I', name));
BEGIN
	IF topic !~ '^[A-Za-z0-9._-]+$' OR length(name) > 63 THEN
		RAISE EXCEPTION 'outbox: topic "%": 1 to 63 letters, digits, ''.'', ''_'' and ''-''', topic
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF existing IS NOT NULL THEN
		IF NOT EXISTS (SELECT FROM pg_class
				WHERE oid = existing AND relispartition
					AND pg_get_expr(relpartbound, oid) = format('FOR VALUES IN (%L)', topic)) THEN
			RAISE EXCEPTION 'outbox: topic "%": its table outbox.% is not the topic''s (another topic''s, or no outbox table)', topic, name
				USING ERRCODE = 'duplicate_table';
		END IF;
		RETURN existing;
	END IF;
	-- Its own topic is its rows' default, as the first table's is.
	EXECUTE format('CREATE TABLE outbox.%I PARTITION OF outbox.messages (topic DEFAULT %L) FOR VALUES IN (%L)',
		name, topic, topic);
	-- Every row is inserted, then updated once by its ack, which is never
	-- HOT (acked is in both partial indexes): vacuum often
	-- (docs/performance.md, "Hot tables").
	EXECUTE format('ALTER TABLE outbox.%I SET (autovacuum_vacuum_scale_factor = 0.01,
		autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1)', name);
	RETURN format('outbox.%I', name)::regclass;
END $$;
-- +goose StatementEnd

-- outbox.publish stores events, the only way rows enter outbox.messages.
-- events are groups of five elements, one per topic: the topic, then its
-- messages' uuids, partition keys, payloads and metadata, each joined by
-- U+001E (which JSON text holds only escaped), in message order. When
-- announced is not NULL, a message is stored only if its key is one of
-- announced: an event goes with the row it announces, and one whose row a
-- guard left unwritten is not stored. It returns how many it stored.
-- +goose StatementBegin
CREATE FUNCTION outbox.publish(events text[], announced text[] DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql AS $$
DECLARE
	stored bigint := 0;
	n bigint;
BEGIN
	IF coalesce(array_length(events, 1), 0) % 5 <> 0 THEN
		RAISE EXCEPTION 'outbox.publish: % elements; events come in fives: topic, uuids, keys, payloads, metadata',
			array_length(events, 1) USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR i IN 0 .. coalesce(array_length(events, 1), 0) / 5 - 1 LOOP
		INSERT INTO outbox.messages (topic, uuid, payload, metadata)
		SELECT events[i * 5 + 1], m.uuid, m.payload::json, m.metadata::json
		FROM unnest(string_to_array(events[i * 5 + 2], E'\x1e'), string_to_array(events[i * 5 + 3], E'\x1e'),
				string_to_array(events[i * 5 + 4], E'\x1e'), string_to_array(events[i * 5 + 5], E'\x1e'))
			WITH ORDINALITY AS m(uuid, key, payload, metadata, n)
		WHERE announced IS NULL OR m.key IN (SELECT unnest(announced))
		ORDER BY m.n;
		GET DIAGNOSTICS n = ROW_COUNT;
		stored := stored + n;
	END LOOP;
	RETURN stored;
END $$;
-- +goose StatementEnd

-- The promotion module's table becomes its topic's partition.
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" DROP CONSTRAINT "pin_promotion_purchase_changed_v1_pkey";
ALTER TABLE outbox."pin_promotion_purchase_changed_v1"
	ADD COLUMN "topic" TEXT NOT NULL DEFAULT 'pin.promotion.purchase-changed.v1';
-- Its unacknowledged index takes the topic, as the one definition's does; it
-- holds only the backlog, so it is quick to build.
DROP INDEX outbox."pin_promotion_purchase_changed_v1_unacked_idx";
CREATE INDEX "pin_promotion_purchase_changed_v1_unacked_idx"
	ON outbox."pin_promotion_purchase_changed_v1" ("offset", "topic") WHERE acked = false;
SELECT setval('outbox.messages_offset_seq', last_value, is_called)
FROM outbox."pin_promotion_purchase_changed_v1_offset_seq";
ALTER TABLE outbox."pin_promotion_purchase_changed_v1"
	ALTER COLUMN "offset" SET DEFAULT nextval('outbox.messages_offset_seq');
DROP SEQUENCE outbox."pin_promotion_purchase_changed_v1_offset_seq";
ALTER TABLE outbox.messages ATTACH PARTITION outbox."pin_promotion_purchase_changed_v1"
	FOR VALUES IN ('pin.promotion.purchase-changed.v1');

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
	IF EXISTS (SELECT FROM pg_inherits WHERE inhparent = 'outbox.messages'::regclass
			AND inhrelid <> 'outbox."pin_promotion_purchase_changed_v1"'::regclass) THEN
		RAISE EXCEPTION 'outbox: other topics have tables in outbox.messages; move their rows out and drop them before going below 00012';
	END IF;
END $$;
-- +goose StatementEnd
ALTER TABLE outbox.messages DETACH PARTITION outbox."pin_promotion_purchase_changed_v1";
CREATE SEQUENCE outbox."pin_promotion_purchase_changed_v1_offset_seq" AS bigint
	OWNED BY outbox."pin_promotion_purchase_changed_v1"."offset";
SELECT setval('outbox."pin_promotion_purchase_changed_v1_offset_seq"', last_value, is_called)
FROM outbox.messages_offset_seq;
ALTER TABLE outbox."pin_promotion_purchase_changed_v1"
	ALTER COLUMN "offset" SET DEFAULT nextval('outbox."pin_promotion_purchase_changed_v1_offset_seq"');
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" DROP CONSTRAINT "pin_promotion_purchase_changed_v1_pkey";
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" DROP COLUMN "topic";
DROP INDEX IF EXISTS outbox."pin_promotion_purchase_changed_v1_unacked_idx"; -- gone with topic, unless made before it had one
CREATE INDEX "pin_promotion_purchase_changed_v1_unacked_idx"
	ON outbox."pin_promotion_purchase_changed_v1" ("offset") WHERE acked = false;
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" ADD PRIMARY KEY ("offset");
DROP FUNCTION outbox.publish(text[], text[]);
DROP FUNCTION outbox.create_topic(text);
DROP FUNCTION outbox.topic_table(text);
DROP TABLE outbox.messages;
