-- The expiry's due rule, defined once: an Active purchase whose ends_at is at
-- or before the cycle's as-of. Every statement that reads the due rows calls
-- it (the batch's selection, the skipped count, the backlog), so no two of
-- them can drift. One SQL expression, IMMUTABLE and not STRICT: the planner
-- inlines it, so `status = 'Active'` still implies the partial
-- promotion_purchases_expiry_idx (docs/adr/0026-the-lifecycle-once.md).

-- +goose Up
CREATE FUNCTION promotion.expiry_due(p promotion.promotion_purchases, as_of timestamptz)
	RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	RETURN p.status = 'Active' AND p.ends_at <= as_of;

-- +goose Down
DROP FUNCTION promotion.expiry_due(promotion.promotion_purchases, timestamptz);
