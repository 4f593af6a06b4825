package expirebench

// BoundSQL is the lower bound of one expiry batch: the same work as the
// module's batch, done by one hand-written statement inside PostgreSQL
// (CTEs): lock up to $2 due purchases with SKIP LOCKED (oldest EndsAt
// first, as the partial index promotion_purchases_expiry_idx orders them),
// expire them, and store one outbox row each through the outbox's own entry,
// outbox.publish, as the module's statement does (uuid = message id, payload
// = the event JSON, metadata = Kafka key and headers), with the full
// pin.promotion.purchase-changed event (targets in position order,
// times in RFC 3339 UTC with microseconds, the amount as a number with two
// decimals) built by json_build_object.
//
// Parameters: $1 as-of (timestamptz), $2 batch size, $3 correlation id (the
// cycle's run id), $4 traceparent. Times are formatted
// in the session's time zone, which postgres.Open sets to UTC.
//
// It is written to be fast, as a bound should be: rows are updated by ctid
// (a TID scan, no join) and timestamps formatted without AT TIME ZONE (a
// zone lookup per call). It skips what only Go can do (the domain's checks,
// the contract's validation, poison handling, the skipped-locked count):
// that overhead is what the benchmark measures against this bound.
const BoundSQL = `
WITH due AS MATERIALIZED (
	SELECT ctid FROM promotion.promotion_purchases
	WHERE status = 'Active' AND ends_at <= $1
	ORDER BY ends_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), expired AS (
	UPDATE promotion.promotion_purchases AS p
	SET status = 'Expired', updated_at = $1, version = p.version + 1, updated_by_user_id = NULL
	WHERE p.ctid = ANY (ARRAY(SELECT ctid FROM due)) AND p.status = 'Active'
	RETURNING p.*
), events AS (
	SELECT e.*, gen_random_uuid() AS message_id FROM expired AS e
), bodies AS (
	SELECT ev.id, ev.message_id, json_build_object(
		'messageId', ev.message_id,
		'eventType', 'pin.promotion.purchase-changed',
		'contractVersion', 1,
		'occurredAt', to_char(ev.updated_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		'aggregateId', ev.id,
		'aggregateType', 'PromotionPurchase',
		'payload', json_build_object(
			'purchaseId', ev.id,
			'tenantId', ev.tenant_id,
			'packageId', ev.package_id,
			'packageCode', ev.package_code,
			'packageKind', ev.package_kind,
			'targets', (SELECT json_agg(json_build_object('targetKind', t.target_kind, 'targetId', t.target_id)
					ORDER BY t.position)
				FROM promotion.promotion_purchase_targets AS t WHERE t.purchase_id = ev.id),
			'status', ev.status,
			'paymentStatus', ev.payment_status,
			'boostWeight', ev.boost_weight,
			'startsAt', to_char(ev.starts_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'endsAt', to_char(ev.ends_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'price', json_build_object(
				'amount', ev.price_amount,
				'currencyId', ev.currency_id,
				'currency', json_build_object(
					'isoCode', ev.currency_iso_code, 'name', ev.currency_name, 'sign', ev.currency_sign)),
			'version', ev.version)) AS body
	FROM events AS ev
), published AS (
	SELECT outbox.publish(ARRAY['pin.promotion.purchase-changed.v1',
		string_agg(b.message_id::text, E'\x1e'), string_agg(b.id::text, E'\x1e'), string_agg(b.body::text, E'\x1e'),
		string_agg(json_build_object(
			'partition_key', b.id,
			'event_type', 'pin.promotion.purchase-changed',
			'contract_version', '1',
			'correlation_id', $3::text,
			'traceparent', $4::text)::text, E'\x1e')])
	FROM bodies AS b
)
SELECT b.id FROM bodies AS b, published`
