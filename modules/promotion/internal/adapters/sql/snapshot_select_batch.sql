-- snapshot_select_batch locks the next batch of a snapshot (pin promotion snapshot), in keyset
-- order by purchase id, with each row's targets and what it keeps of its last event (the one the
-- snapshot redelivers).
-- @after After (the nil UUID from the start), @batch_limit Limit, @include_ended IncludeEnded
-- (false: Active only), @tenant_id TenantID (NULL: any), @purchase_ids PurchaseIDs (uuid[], empty:
-- any), @target_kind TargetKind (NULL: any).
-- FOR SHARE (docs/runbooks/consumer-current-state.md, and its ADR): a transition locks its row
-- FOR UPDATE, so a cancel waits until the batch commits and its event comes after the snapshot's,
-- and the expiry's SKIP LOCKED passes the row over for one batch. A batch that meets a row a
-- transition holds waits, then reads the committed result (and drops the row if it no longer
-- matches). LIMIT counts the rows locked, not those read.
-- The purchase columns are purchaseColumns (TestQueriesListPurchaseColumns).
SELECT p.id, p.tenant_id, p.package_id, p.package_code, p.package_kind, p.boost_weight, p.price_amount,
	p.currency_id, p.currency_iso_code, p.currency_name, p.currency_sign, p.status, p.payment_status,
	p.starts_at, p.ends_at, p.cancel_reason, p.created_by_user_id, p.updated_by_user_id, p.created_at,
	p.updated_at, p.version,
	(SELECT string_agg(t.target_kind || ' ' || t.target_id::text, ',' ORDER BY t.position)
		FROM promotion.promotion_purchase_targets AS t WHERE t.purchase_id = p.id),
	p.last_event_id, p.last_event_at
FROM promotion.promotion_purchases AS p
WHERE p.id > @after
	AND (@include_ended OR p.status = 'Active')
	AND (@tenant_id::uuid IS NULL OR p.tenant_id = @tenant_id::uuid)
	AND (cardinality(@purchase_ids::uuid[]) = 0 OR p.id = ANY(@purchase_ids::uuid[]))
	AND (@target_kind::text IS NULL OR EXISTS (SELECT 1 FROM promotion.promotion_purchase_targets AS k
		WHERE k.purchase_id = p.id AND k.target_kind = @target_kind::text))
ORDER BY p.id
LIMIT @batch_limit
FOR SHARE OF p
