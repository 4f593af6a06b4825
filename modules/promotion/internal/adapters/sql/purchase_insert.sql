-- purchase_insert claims a request's Idempotency-Key and inserts a purchase and its targets, and only
-- if the package row, locked FOR SHARE, still equals the active package the purchase was built from
-- (ADR-0004), and the key, when there is one, was free. It is the whole purchase, one statement and so
-- one transaction (it runs autocommitted): the CTE purchase returns the inserted id, or nothing, and
-- published hands its events to outbox.publish, which stores them only if that id was inserted; the
-- final SELECT reads published, so the call runs (a CTE nothing reads is never run). A key that another
-- request holds makes the claim wait until that request commits (then nothing is written) or rolls
-- back. The parameters (insertPurchaseArgs):
--   @pkg_*: the package as built from;
--   the purchase's values, named as purchaseColumns (TestQueriesListPurchaseColumns);
--   @target_kinds, @target_ids, @target_positions: its targets as three arrays;
--   @last_event_id, @last_event_at: its event's messageId and occurredAt (what a snapshot redelivers);
--   @claim_key, @claim_tenant_id, @claim_request_hash, @claim_created_at: the key's record, all NULL
--   for a request without one;
--   @events: its events as outbox.Publisher.Prepare encoded them.
WITH pkg AS (
	SELECT FROM promotion.promotion_packages AS p JOIN promotion.currencies AS c ON c.id = p.currency_id
	WHERE p.id = @pkg_id AND p.is_active AND p.code = @pkg_code AND p.kind = @pkg_kind
		AND p.duration_days = @pkg_duration_days AND p.boost_weight = @pkg_boost_weight
		AND p.price_amount = @pkg_price_amount AND p.currency_id = @pkg_currency_id
		AND c.iso_code = @pkg_currency_iso_code AND c.name = @pkg_currency_name AND c.sign = @pkg_currency_sign
	FOR SHARE OF p
), claim AS (
	INSERT INTO promotion.idempotency_keys (tenant_id, key, request_hash, purchase_id, created_at)
	SELECT @claim_tenant_id, @claim_key, @claim_request_hash, @id, @claim_created_at
	FROM pkg
	WHERE @claim_key::text IS NOT NULL
	ON CONFLICT (tenant_id, key) DO NOTHING
	RETURNING key
), purchase AS (
	INSERT INTO promotion.promotion_purchases (id, tenant_id, package_id, package_code, package_kind,
		boost_weight, price_amount, currency_id, currency_iso_code, currency_name, currency_sign, status,
		payment_status, starts_at, ends_at, cancel_reason, created_by_user_id, updated_by_user_id,
		created_at, updated_at, version, last_event_id, last_event_at)
	SELECT @id, @tenant_id, @package_id, @package_code, @package_kind, @boost_weight, @price_amount,
		@currency_id, @currency_iso_code, @currency_name, @currency_sign, @status, @payment_status,
		@starts_at, @ends_at, @cancel_reason, @created_by_user_id, @updated_by_user_id, @created_at,
		@updated_at, @version, @last_event_id, @last_event_at
	FROM pkg
	WHERE @claim_key::text IS NULL OR EXISTS (SELECT FROM claim)
	RETURNING id
), targets AS (
	INSERT INTO promotion.promotion_purchase_targets (purchase_id, target_kind, target_id, position)
	SELECT purchase.id, t.kind, t.id, t.position
	FROM purchase, unnest(@target_kinds::text[], @target_ids::uuid[], @target_positions::smallint[]) AS t(kind, id, position)
), published AS (
	SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM purchase))
)
SELECT id FROM purchase, published
