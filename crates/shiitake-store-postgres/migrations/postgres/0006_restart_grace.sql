-- A restart of the database is not the death of every process.
--
-- A restart (or a failover to a replica) ends every backend at once, so each process
-- would see every other's upkeep backend gone and free its Sessions. A node row now
-- records the server incarnation it was registered on and how long its process asks
-- to be waited for after a restart; a row of another incarnation whose backend is
-- gone is away, not dead, until its grace has passed since a live process first saw
-- it so (nodes.rs).

-- pg_postmaster_start_time() of the server the row was registered on; NULL for rows
-- registered before this migration, whose gone backend is a death at once as before.
ALTER TABLE hub_nodes ADD COLUMN server_start TIMESTAMPTZ;
-- When a heartbeat of a live process first found this row's backend gone while the
-- row was registered on another incarnation; NULL while nobody has.
ALTER TABLE hub_nodes ADD COLUMN gone_at TIMESTAMPTZ;
-- How long the process asks to be waited for after the server restarts, from gone_at:
-- its lease period (at least the reconnection backoff's cap and two heartbeats).
ALTER TABLE hub_nodes ADD COLUMN rejoin_ms BIGINT;
