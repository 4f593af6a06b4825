-- Storage settings of the tables that churn like queues (docs/performance.md,
-- "Hot tables"). PostgreSQL's defaults vacuum a
-- table once a fifth of it is dead: far too late for a table where every
-- event leaves a dead row version behind.
--
-- fillfactor leaves room on each page for the next version of its rows, so
-- an update that changes no indexed column stays on the page (HOT) and the
-- page prunes itself without a VACUUM. It applies to pages filled from now
-- on; no table is rewritten.

-- +goose Up

-- The boost projection: a row per boosted target, updated by every event of
-- its targets. Its partial index on active_purchases = 0 made every update
-- non-HOT (active_purchases changes each time); the projection now finds the
-- rows it empties by their key (modules/boost). A page is pruned only once
-- no open transaction can see its old versions, so it needs room for a few
-- seconds of them: fillfactor 20 (10k targets take about 5 MB).
DROP INDEX boost.target_boosts_emptied_idx;
ALTER TABLE boost.target_boosts SET (fillfactor = 20,
	autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 100, autovacuum_vacuum_cost_delay = 0);

-- What each Active purchase contributes: inserted, then deleted when the
-- purchase ends.
ALTER TABLE boost.purchase_targets SET (
	autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1);

-- The outbox: every row is inserted, then updated once by its ack. The ack
-- is never HOT, whatever the fillfactor: acked is in the predicate of both
-- partial indexes the relay and the retention read by. So no fillfactor,
-- only a vacuum that comes often enough for new rows to reuse the space.
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" SET (
	autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1);

-- The consumer kit: the inbox takes a row per event and loses it after the
-- retention; the version guard updates a purchase's row at each of its
-- events. Those updates are HOT already (version is not indexed) and come
-- while the row's page is still the one being filled, so a fillfactor would
-- only leave every older page partly empty.
ALTER TABLE consumer.inbox SET (
	autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1);
ALTER TABLE consumer.aggregate_versions SET (
	autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1);

-- Dead letters are few; an operator deletes them in bulk after a replay.
ALTER TABLE consumer.dead_letters SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 50);
ALTER TABLE outbox.dead_letters SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 50);

-- +goose Down
ALTER TABLE outbox.dead_letters RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE consumer.dead_letters RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE consumer.aggregate_versions RESET (
	autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE consumer.inbox RESET (
	autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE outbox."pin_promotion_purchase_changed_v1" RESET (
	autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE boost.purchase_targets RESET (
	autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE boost.target_boosts RESET (fillfactor,
	autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay);
CREATE INDEX target_boosts_emptied_idx ON boost.target_boosts (target_kind, target_id)
	WHERE active_purchases = 0;
