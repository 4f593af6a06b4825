-- expire_backlog counts what the expiry leaves as of $1 (the database's now() when NULL): the due
-- Active purchases, poison included; the oldest due ends_at; and those of them known as poison.
-- CountBacklog (after each cycle) and ReadExpiryStatus (`pin status`) both read it, so the backlog
-- the metric and the status show is one rule. One scan of the partial promotion_purchases_expiry_idx
-- (ends_at and id are its columns: index-only), the few poison rows hashed beside it.
SELECT count(*), min(p.ends_at), count(x.purchase_id)
FROM promotion.promotion_purchases AS p
LEFT JOIN promotion.expire_poison AS x ON x.purchase_id = p.id
WHERE promotion.expiry_due(p, coalesce($1::timestamptz, now()))
