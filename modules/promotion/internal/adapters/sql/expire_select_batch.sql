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
-- The purchase columns are purchaseColumns (TestExpireQueriesReadPurchaseColumns).
WITH kept AS (
	SELECT count(*) AS n FROM (
		SELECT 1 FROM promotion.expire_poison AS x JOIN promotion.promotion_purchases AS p ON p.id = x.purchase_id
		WHERE p.status = 'Active' AND p.ends_at <= @as_of AND p.id <> ALL(@exclude::uuid[])
		LIMIT least(@poison_retries, 1)
	) AS r
), due AS (
	SELECT id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		cancel_reason, created_by_user_id, updated_by_user_id, created_at, updated_at, version
	FROM promotion.promotion_purchases
	WHERE status = 'Active' AND ends_at <= @as_of AND id <> ALL(@exclude::uuid[])
		AND NOT EXISTS (SELECT 1 FROM promotion.expire_poison AS x WHERE x.purchase_id = promotion_purchases.id)
	ORDER BY ends_at, id LIMIT @batch_limit - (SELECT n FROM kept)
	FOR UPDATE SKIP LOCKED
), retry AS (
	SELECT p.id, p.tenant_id, p.package_id, p.package_code, p.package_kind, p.boost_weight, p.price_amount,
		p.currency_id, p.currency_iso_code, p.currency_name, p.currency_sign, p.status, p.payment_status,
		p.starts_at, p.ends_at, p.cancel_reason, p.created_by_user_id, p.updated_by_user_id,
		p.created_at, p.updated_at, p.version,
		x.last_attempt_at AS sort_at
	FROM promotion.promotion_purchases AS p JOIN promotion.expire_poison AS x ON x.purchase_id = p.id
	WHERE p.status = 'Active' AND p.ends_at <= @as_of AND p.id <> ALL(@exclude::uuid[])
	ORDER BY x.last_attempt_at, x.purchase_id LIMIT least(@poison_retries, @batch_limit - (SELECT count(*) FROM due))
	FOR UPDATE OF p SKIP LOCKED
), picked AS (
	SELECT 0 AS slot, ends_at AS sort_at, id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		cancel_reason, created_by_user_id, updated_by_user_id, created_at, updated_at, version
	FROM due
	UNION ALL
	SELECT 1, sort_at, id, tenant_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
		currency_iso_code, currency_name, currency_sign, status, payment_status, starts_at, ends_at,
		cancel_reason, created_by_user_id, updated_by_user_id, created_at, updated_at, version
	FROM retry
)
SELECT k.id, k.tenant_id, k.package_id, k.package_code, k.package_kind, k.boost_weight, k.price_amount,
	k.currency_id, k.currency_iso_code, k.currency_name, k.currency_sign, k.status, k.payment_status,
	k.starts_at, k.ends_at, k.cancel_reason, k.created_by_user_id, k.updated_by_user_id, k.created_at,
	k.updated_at, k.version,
	k.slot,
	(SELECT string_agg(t.target_kind || ' ' || t.target_id::text, ',' ORDER BY t.position)
		FROM promotion.promotion_purchase_targets AS t WHERE t.purchase_id = k.id),
	(SELECT count(*) FROM (
		SELECT 1 FROM promotion.promotion_purchases AS q
		WHERE q.status = 'Active' AND q.ends_at <= @as_of AND q.id <> ALL(@exclude::uuid[])
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
