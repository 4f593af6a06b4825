-- purchase_transition writes transitions (cancel, expire) of any number of purchases and their
-- events in one statement, each guarded by the version it was loaded at: a row that moved on is not
-- written, not returned and gets no event. The cancel, the expiry batch and its row-by-row redo all
-- run it, so a transition has one write path. The parameters (transitionArgs):
--   the columns vary as River's JobSetStateIfRunningMany does, never the text: @set_<column> says
--   whether a column is written (the ones any row changes); an array not written is NULL, and unnest
--   pads it. last_event_id and last_event_at, what a snapshot redelivers, are always written. The
--   columns are transitionColumns (TestTransitionStatementWritesTransitionColumns);
--   @forget_poison: the expiry batch forgets the poison records of the rows it wrote;
--   @events: the rows' events as outbox.Publisher.Prepare encoded them. outbox.publish stores only
--   those of the rows updated returns; the final SELECT reads published, so the call runs.
WITH updated AS (
	UPDATE promotion.promotion_purchases AS p SET
		status = CASE WHEN @set_status::boolean THEN v.status ELSE p.status END,
		payment_status = CASE WHEN @set_payment_status::boolean THEN v.payment_status ELSE p.payment_status END,
		starts_at = CASE WHEN @set_starts_at::boolean THEN v.starts_at ELSE p.starts_at END,
		ends_at = CASE WHEN @set_ends_at::boolean THEN v.ends_at ELSE p.ends_at END,
		cancel_reason = CASE WHEN @set_cancel_reason::boolean THEN v.cancel_reason ELSE p.cancel_reason END,
		updated_by_user_id = CASE WHEN @set_updated_by_user_id::boolean THEN v.updated_by_user_id ELSE p.updated_by_user_id END,
		updated_at = CASE WHEN @set_updated_at::boolean THEN v.updated_at ELSE p.updated_at END,
		version = CASE WHEN @set_version::boolean THEN v.version ELSE p.version END,
		last_event_id = v.last_event_id,
		last_event_at = v.last_event_at
	FROM unnest(@id::uuid[], @previous_version::bigint[], @status::text[], @payment_status::text[],
			@starts_at::timestamptz[], @ends_at::timestamptz[], @cancel_reason::text[], @updated_by_user_id::uuid[],
			@updated_at::timestamptz[], @version::bigint[], @last_event_id::uuid[], @last_event_at::timestamptz[])
		AS v(id, previous_version, status, payment_status, starts_at, ends_at, cancel_reason, updated_by_user_id,
			updated_at, version, last_event_id, last_event_at)
	WHERE p.id = v.id AND p.version = v.previous_version
	RETURNING p.id
), forgotten AS (
	DELETE FROM promotion.expire_poison
	WHERE @forget_poison::boolean AND purchase_id IN (SELECT id FROM updated)
), published AS (
	SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM updated))
)
SELECT id FROM updated, published
