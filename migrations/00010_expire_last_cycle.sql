-- The expiry job's last cycle, kept where `pin status` (which has only the
-- database) can read it: the metrics of an instance die with it, and a
-- cycle that expired nothing leaves no event. One row, rewritten at the end
-- of every cycle by the instance that ran it: the last cycle finished
-- (docs/adr/0017-operators-never-stuck.md).

-- +goose Up
CREATE TABLE promotion.expire_last_cycle (
	-- Always true: the table holds one row.
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	run_id uuid NOT NULL,
	as_of timestamptz NOT NULL,
	finished_at timestamptz NOT NULL,
	-- The session's application_name: which instance ran it.
	instance text NOT NULL,
	batches integer NOT NULL,
	expired integer NOT NULL,
	skipped_locked integer NOT NULL,
	failed integer NOT NULL,
	duration_ms bigint NOT NULL,
	-- NULL when the cycle completed; the infrastructure error otherwise.
	error text
);

-- +goose Down
DROP TABLE promotion.expire_last_cycle;
