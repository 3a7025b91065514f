-- The processes of a Hub, so a process's death frees its Sessions at once, and the
-- handover mark of a lease given back by a process that drains.
--
-- Each process registers one row per store it opens, naming the backend of its
-- upkeep connection (the one that renews its leases and beats its heartbeat). While
-- that backend exists in pg_stat_activity the process is alive; when the process
-- dies, PostgreSQL ends the backend with its connection, and the next heartbeat of
-- any other process of the Agent releases the dead process's leases and deletes its
-- row. A process that is alive but stopped (paused) keeps its connection: only the
-- lease expiry frees its Sessions. `backend_start` tells a reused pid apart.
CREATE TABLE hub_nodes (
    agent_id      TEXT NOT NULL,
    holder        TEXT NOT NULL,
    backend_pid   INTEGER NOT NULL,
    backend_start TIMESTAMPTZ,
    started_at    TIMESTAMPTZ NOT NULL,
    heartbeat_at  TIMESTAMPTZ NOT NULL,
    -- Takes no more Sessions: the process is leaving and hands its own over.
    draining      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (agent_id, holder)
);

-- The token of the tenure that handed the Session over as its process drained. The
-- next claim takes `token + 1`, so `handover_token + 1 = token` tells that owner its
-- work was stopped on purpose (not a crash); any later tenure no longer matches.
ALTER TABLE session_leases ADD COLUMN handover_token BIGINT;
