-- expire_write is the module's half of the expiry batch's one write (ExpireRepository.writeSet):
-- updated is purchase_transition (its text, placed here once at start-up: transitionCTE), and
-- forgotten forgets the poison records of the rows it wrote when @forget_poison. platform/outbox
-- adds its inserts of the batch's events over updated (outbox.NewChange) and the final SELECT.
forgotten AS (
	DELETE FROM promotion.expire_poison
	WHERE @forget_poison::boolean AND purchase_id IN (SELECT id FROM updated)
)
