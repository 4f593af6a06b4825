-- expire_select_batch locks one expiry batch in one round trip.
-- @as_of AsOf, @exclude Exclude (uuid[]), @batch_limit Limit, @poison_retries the most poison
-- retries (app.PoisonRetries).
--   kept:    one place of the limit kept for poison when @poison_retries allows a retry and known poison is due,
--            so poison is retried while due rows fill every batch.
--   due:     Active, due, not known poison, oldest first, FOR UPDATE SKIP LOCKED, at most the limit
--            less the kept place; WHERE and ORDER BY match the partial index
--            promotion_purchases_expiry_idx, so terminal rows cost nothing.
--   retry:   known poison, least recently tried first, at most @poison_retries and only in the room the due rows
--            leave under the limit (the kept place at least).
--   targets: each row's as "kind id,kind id" in position order.
--   skipped: due rows another transaction holds. SKIP LOCKED does not say, so a plain read (it does
--            not wait for locks) counts the window the selection scanned, capped, minus the rows
--            taken. The window ends at the due rows' last row when they are full, else at the end of the
--            due range: one row bound, AND-ed, so it is the count's index condition and the count
--            reads the window, not the backlog (an OR made it a filter).
-- The due rule is promotion.expiry_due (migration 00013), inlined by the planner, so the
-- partial index still serves it. The purchase columns are purchaseColumns, written once for
-- each locking read (due, retry); picked and the result carry them as they are (* of a
-- CTE whose list is written here), led by slot and sort_at (TestQueriesListPurchaseColumns).
WITH kept AS (
	SELECT count(*) AS n FROM (
		SELECT 1 FROM promotion.expire_poison AS x JOIN promotion.promotion_purchases AS p ON p.id = x.purchase_id
		WHERE promotion.expiry_due(p, @as_of) AND p.id <> ALL(@exclude::uuid[])
		LIMIT least(@poison_retries, 1)
	) AS r
), due AS (
	SELECT ends_at AS sort_at, id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		cancel_reason, created_by_user_id, updated_by_user_id, created_at, updated_at, version
	FROM promotion.promotion_purchases AS p
	WHERE promotion.expiry_due(p, @as_of) AND id <> ALL(@exclude::uuid[])
		AND NOT EXISTS (SELECT 1 FROM promotion.expire_poison AS x WHERE x.purchase_id = p.id)
	ORDER BY ends_at, id LIMIT @batch_limit - (SELECT n FROM kept)
	FOR UPDATE SKIP LOCKED
), retry AS (
	SELECT x.last_attempt_at AS sort_at, p.id, p.tenant_id, p.package_id, p.package_code, p.package_kind, p.boost_weight, p.price_amount,
		p.currency_id, p.currency_iso_code, p.currency_name, p.currency_sign, p.status, p.payment_status,
		p.starts_at, p.ends_at, p.cancel_reason, p.created_by_user_id, p.updated_by_user_id,
		p.created_at, p.updated_at, p.version
	FROM promotion.promotion_purchases AS p JOIN promotion.expire_poison AS x ON x.purchase_id = p.id
	WHERE promotion.expiry_due(p, @as_of) AND p.id <> ALL(@exclude::uuid[])
	ORDER BY x.last_attempt_at, x.purchase_id LIMIT least(@poison_retries, @batch_limit - (SELECT count(*) FROM due))
	FOR UPDATE OF p SKIP LOCKED
), picked AS (
	SELECT 0 AS slot, due.* FROM due
	UNION ALL
	SELECT 1, retry.* FROM retry
)
SELECT k.*,
	(SELECT string_agg(t.target_kind || ' ' || t.target_id::text, ',' ORDER BY t.position)
		FROM promotion.promotion_purchase_targets AS t WHERE t.purchase_id = k.id),
	(SELECT count(*) FROM (
		SELECT 1 FROM promotion.promotion_purchases AS q
		WHERE promotion.expiry_due(q, @as_of) AND q.id <> ALL(@exclude::uuid[])
			AND NOT EXISTS (SELECT 1 FROM promotion.expire_poison AS x WHERE x.purchase_id = q.id)
			AND (q.ends_at, q.id) <= (SELECT ends_at, id FROM (
				(SELECT ends_at, id FROM due ORDER BY ends_at, id OFFSET greatest(@batch_limit - (SELECT n FROM kept) - 1, 0) LIMIT 1)
				UNION ALL SELECT @as_of, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS bound
				ORDER BY ends_at, id LIMIT 1)
		ORDER BY q.ends_at, q.id LIMIT @batch_limit + (SELECT count(*) FROM due)
	) AS w) - (SELECT count(*) FROM due),
	(SELECT n FROM kept)
FROM picked AS k
ORDER BY k.slot, k.sort_at, k.id
