-- What the expire-promotions job knows about poison purchases: due Active
-- purchases it could not expire (docs/expire-promotions-job.md, "Poison
-- purchases"). A purchase listed here is no longer selected into a batch's
-- regular slots; it is retried only in the batch's small retry slot, the
-- least recently tried first. The row is deleted when the purchase expires,
-- and with the purchase; an operator releases a purchase by deleting its row.

-- +goose Up
CREATE TABLE promotion.expire_poison (
	purchase_id uuid PRIMARY KEY REFERENCES promotion.promotion_purchases (id) ON DELETE CASCADE,
	failures integer NOT NULL CHECK (failures > 0),
	last_error text NOT NULL,
	first_failed_at timestamptz NOT NULL,
	last_attempt_at timestamptz NOT NULL
);

CREATE INDEX expire_poison_last_attempt_idx ON promotion.expire_poison (last_attempt_at, purchase_id);

-- +goose Down
DROP TABLE promotion.expire_poison;
