-- An operator can discard a dead letter, of the relay or of a consumer, that
-- can never be replayed (or should not be): it leaves the lists, the counts
-- and `replay --all`, but its row stays, with who-knows-why in discard_reason,
-- for `dead-letters list --discarded` (docs/adr/0017-operators-never-stuck.md).

-- +goose Up
ALTER TABLE outbox.dead_letters
	ADD COLUMN discarded_at timestamptz,
	ADD COLUMN discard_reason text,
	ADD CONSTRAINT dead_letters_discard_reason
		CHECK ((discarded_at IS NULL) = (discard_reason IS NULL) AND discard_reason <> '');

ALTER TABLE consumer.dead_letters
	ADD COLUMN discarded_at timestamptz,
	ADD COLUMN discard_reason text,
	ADD CONSTRAINT dead_letters_discard_reason
		CHECK ((discarded_at IS NULL) = (discard_reason IS NULL) AND discard_reason <> '');

-- +goose Down
ALTER TABLE consumer.dead_letters
	DROP CONSTRAINT dead_letters_discard_reason,
	DROP COLUMN discard_reason,
	DROP COLUMN discarded_at;
ALTER TABLE outbox.dead_letters
	DROP CONSTRAINT dead_letters_discard_reason,
	DROP COLUMN discard_reason,
	DROP COLUMN discarded_at;
