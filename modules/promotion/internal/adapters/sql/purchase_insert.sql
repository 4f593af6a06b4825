-- purchase_insert inserts a purchase and its targets, and only if the package row, locked FOR SHARE,
-- still equals the active package the purchase was built from (ADR-0004). It is the head of a
-- statement: the CTE purchase returns the inserted id, or nothing; the caller adds the outbox's
-- CTEs over it and the final SELECT (insertPurchase, addInOneStatement).
-- $1..$10 the package as built from: id, code, kind, duration_days, boost_weight, price_amount,
--         currency_id, and the currency's iso_code, name, sign;
-- $11..$31 the purchase's values in the order of purchaseColumns (purchaseValues;
--         TestQueriesListPurchaseColumns);
-- $32..$34 its targets as three arrays: kinds, ids, positions;
-- $35, $36 its event's messageId and occurredAt (last_event_id, last_event_at: what a snapshot
--         redelivers).
WITH pkg AS (
	SELECT FROM promotion.promotion_packages AS p JOIN promotion.currencies AS c ON c.id = p.currency_id
	WHERE p.id = $1 AND p.is_active AND p.code = $2 AND p.kind = $3 AND p.duration_days = $4
		AND p.boost_weight = $5 AND p.price_amount = $6 AND p.currency_id = $7
		AND c.iso_code = $8 AND c.name = $9 AND c.sign = $10
	FOR SHARE OF p
), purchase AS (
	INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
		boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign, status,
		payment_status, starts_at, ends_at, cancel_reason, created_by_user_id, updated_by_user_id,
		created_at, updated_at, version, last_event_id, last_event_at)
	SELECT $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28,
		$29, $30, $31, $35, $36
	FROM pkg
	RETURNING id
), targets AS (
	INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
	SELECT purchase.id, t.kind, t.id, t.position
	FROM purchase, unnest($32::text[], $33::uuid[], $34::smallint[]) AS t(kind, id, position)
)
