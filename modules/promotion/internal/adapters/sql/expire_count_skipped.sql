-- expire_count_skipped counts the due rows another transaction holds when the selection
-- (expire_select_batch) took none, so it had no row to carry the count in.
-- @as_of AsOf, @exclude Exclude (uuid[]), @batch_limit Limit.
SELECT count(*) FROM (
	SELECT 1 FROM promotion.promotion_purchases AS p
	WHERE promotion.expiry_due(p, @as_of) AND p.id <> ALL(@exclude::uuid[])
		AND NOT EXISTS (SELECT 1 FROM promotion.expire_poison AS x WHERE x.purchase_id = p.id)
	ORDER BY ends_at, id LIMIT @batch_limit
) AS w
