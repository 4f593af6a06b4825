-- A snapshot redelivers; it never invents (docs/adr/0012-purchase-snapshot.md).
--
-- last_event_id and last_event_at are the messageId and occurredAt of the
-- last event published for the purchase, written by the statement that
-- writes the transition (or the insert). A snapshot rebuilds the payload from
-- the row — the state after that transition, which nothing changes without an
-- event — and sends it under these two. NULL: the last event predates this
-- migration and was no longer in the outbox; the snapshot skips and lists the
-- purchase, or with --send-derived-ids sends it under an id derived from
-- (purchase id, version), the same on every run.
--
-- promotion.snapshot_runs keeps each snapshot's filters and position,
-- updated in the transaction of each batch's outbox write, so
-- `pin promotion snapshot --snapshot-id ID` resumes exactly where it stopped,
-- whatever stopped it.

-- +goose Up
ALTER TABLE promotion.promotion_purchases
	ADD COLUMN last_event_id uuid,
	ADD COLUMN last_event_at timestamptz;

-- The last transition's event, where the outbox still holds it: the row of
-- the purchase's key at its current version, not written by a snapshot (an
-- earlier snapshot invented new ids at the same version), the first such row.
UPDATE promotion.promotion_purchases AS p
SET last_event_id = e.message_id::uuid, last_event_at = e.occurred_at::timestamptz
FROM (
	SELECT DISTINCT ON (o.metadata->>'partition_key', o.payload->'payload'->>'version')
		o.metadata->>'partition_key' AS purchase_id,
		o.payload->'payload'->>'version' AS version,
		o.uuid AS message_id,
		o.payload->>'occurredAt' AS occurred_at
	FROM outbox."pin_promotion_purchase_changed_v1" AS o
	WHERE coalesce(o.metadata->>'event_origin', 'transition') = 'transition'
		AND o.uuid ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
		AND o.payload->>'occurredAt' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$'
	ORDER BY o.metadata->>'partition_key', o.payload->'payload'->>'version', o."offset"
) AS e
WHERE e.purchase_id = p.id::text AND e.version = p.version::text;

-- One row per snapshot: what it selects, and the last purchase done (in id
-- order) with what it wrote so far. after_purchase_id is the nil UUID until
-- the first batch commits; completed_at is set by the batch that reaches the end.
CREATE TABLE promotion.snapshot_runs (
	id uuid PRIMARY KEY,
	tenant_id uuid,
	purchase_ids uuid[] NOT NULL DEFAULT '{}',
	target_kind text,
	include_ended boolean NOT NULL,
	after_purchase_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
	events bigint NOT NULL DEFAULT 0 CHECK (events >= 0),
	failed bigint NOT NULL DEFAULT 0 CHECK (failed >= 0),
	started_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	completed_at timestamptz,
	CONSTRAINT snapshot_runs_id_check CHECK (id <> '00000000-0000-0000-0000-000000000000'),
	CONSTRAINT snapshot_runs_tenant_id_check CHECK (tenant_id <> '00000000-0000-0000-0000-000000000000'),
	CONSTRAINT snapshot_runs_target_kind_check CHECK (target_kind IN ('Project', 'PropertyObject', 'Post'))
);

-- +goose Down
DROP TABLE promotion.snapshot_runs;
ALTER TABLE promotion.promotion_purchases
	DROP COLUMN last_event_at,
	DROP COLUMN last_event_id;
