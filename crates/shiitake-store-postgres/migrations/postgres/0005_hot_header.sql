-- Every commit of an owner rewrites its Session's header, and that update was never
-- HOT (heap-only: a new row version on the same page, no index touched), because
-- `last_activity_at`, which every commit stamps, was a column of the inbox index: each
-- rewrite inserted into all three of the table's indexes again, and wrote them to WAL
-- (docs/benchmarks.md, "The Hub's header update made HOT").
--
-- The inbox index now holds the activity's second instead, a column PostgreSQL computes
-- from `last_activity_at`; commits within one second change no indexed column, so their
-- updates are HOT. The inbox order is unchanged: the listing orders by the second, then
-- by the millisecond (`ORDER BY inbox_rank, activity_second DESC, last_activity_at DESC,
-- id`), which is the same order since the second never falls as the millisecond grows,
-- and PostgreSQL reads it from the index, sorting only the rows within one second.
--
-- A fill factor of 70 leaves room on each page for the new versions HOT needs. Adding
-- the stored column rewrites the table once, under its lock.
ALTER TABLE sessions
    ADD COLUMN activity_second BIGINT GENERATED ALWAYS AS (last_activity_at / 1000) STORED;
ALTER TABLE sessions SET (fillfactor = 70);
DROP INDEX sessions_by_inbox;
CREATE INDEX sessions_by_inbox ON sessions (agent_id, inbox_rank, activity_second DESC);
