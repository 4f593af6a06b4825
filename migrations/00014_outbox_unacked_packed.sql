-- The unacknowledged index is packed (fillfactor 100), so that it is
-- smaller than the primary key whenever both hold the same rows
-- (docs/adr/0024-the-outbox-owns-its-table.md, decision 8).
--
-- Analyzed while every row of a topic is unacknowledged (a backlog built up
-- while the relay was away, on a table the retention had emptied), the
-- statistics say the two indexes hold the same rows, in the same order; the
-- relay's read has to check acked on the heap through either (it locks its
-- rows, so the planner keeps the index's predicate as a filter), and the two
-- cost the same to the last digit. The planner then keeps whichever it tried
-- first, and a read through the primary key walks every row acknowledged
-- since, on every read, until the relay plans again (a second later,
-- store.ForgetPlans; by then the acknowledgements have added entries to the
-- primary key only, and it is the larger). With every page of the unacknowledged
-- index full, it has a tenth fewer pages than the primary key (whose pages
-- are left 90 % full) and costs less; below a few pages both cost one page
-- and a plan may still take the primary key, which then walks at most those
-- few pages until the relay plans again (a second, store.ForgetPlans).
--
-- Packing costs nothing here: entries are appended at the index's right end
-- (offsets only grow; a replayed dead letter, rare, goes back at its own
-- offset) and leave it only by vacuum. The existing index is not rebuilt:
-- its pages split full from now on, and as the backlog they hold is
-- acknowledged and vacuumed, the index is replaced by packed pages; REINDEX
-- INDEX CONCURRENTLY packs it at once (docs/runbooks/outbox-backlog.md).
-- ALTER INDEX ... SET takes a lock that lets rows be written and read.

-- +goose Up
-- outbox.pack_unacked_index packs the unacknowledged index of a topic's
-- table, the partition of outbox.messages_unacked_idx on it.
-- +goose StatementBegin
CREATE FUNCTION outbox.pack_unacked_index(topic_table regclass) RETURNS void
	LANGUAGE plpgsql STRICT AS $$
DECLARE
	unacked regclass;
BEGIN
	SELECT i.inhrelid INTO STRICT unacked FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
	WHERE i.inhparent = 'outbox.messages_unacked_idx'::regclass AND x.indrelid = topic_table;
	EXECUTE format('ALTER INDEX %s SET (fillfactor = 100)', unacked);
END $$;
-- +goose StatementEnd
SELECT outbox.pack_unacked_index(inhrelid) FROM pg_inherits WHERE inhparent = 'outbox.messages'::regclass;

-- outbox.create_topic makes a topic's table as 00012 does
-- (outbox.make_topic_table), then packs its unacknowledged index.
ALTER FUNCTION outbox.create_topic(text) RENAME TO make_topic_table;
-- +goose StatementBegin
CREATE FUNCTION outbox.create_topic(topic text) RETURNS regclass
	LANGUAGE plpgsql STRICT AS $$
DECLARE
	made regclass := outbox.make_topic_table(topic);
BEGIN
	PERFORM outbox.pack_unacked_index(made);
	RETURN made;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION outbox.create_topic(text);
ALTER FUNCTION outbox.make_topic_table(text) RENAME TO create_topic;
DROP FUNCTION outbox.pack_unacked_index(regclass);
-- +goose StatementBegin
DO $$
DECLARE
	unacked regclass;
BEGIN
	FOR unacked IN SELECT inhrelid FROM pg_inherits WHERE inhparent = 'outbox.messages_unacked_idx'::regclass LOOP
		EXECUTE format('ALTER INDEX %s RESET (fillfactor)', unacked);
	END LOOP;
END $$;
-- +goose StatementEnd
