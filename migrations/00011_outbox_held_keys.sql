-- A purchase's records reach Kafka in version order, always: while a record
-- of a key waits in outbox.dead_letters (neither replayed nor discarded), the
-- relay sends none of the key's later records
-- (docs/adr/0015-a-message-kafka-never-takes.md, decision 8).
--
-- The relay's read probes this index for each row it claims: on a topic
-- with nothing held, each probe finds the empty set at once.

-- +goose Up
CREATE INDEX dead_letters_held_keys_idx
	ON outbox.dead_letters (topic, (metadata->>'partition_key'))
	WHERE discarded_at IS NULL;

-- +goose Down
DROP INDEX outbox.dead_letters_held_keys_idx;
