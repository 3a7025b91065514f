-- The Shiitake store on PostgreSQL: the same rows as the SQLite store, each keyed by
-- the Agent (tenant) first, plus what several processes on one database need:
-- leases with fencing tokens, and requests forwarded to a Session's owner.
--
-- Integers are BIGINT (Unix milliseconds, sequences, counts); JSON is TEXT, kept
-- byte for byte as written (payloads are compared as text for idempotency).

CREATE TABLE sessions (
    agent_id          TEXT NOT NULL,
    id                TEXT NOT NULL,
    create_request_id TEXT,
    created_at        BIGINT NOT NULL,
    last_activity_at  BIGINT NOT NULL,
    settled_at        BIGINT,
    title             TEXT NOT NULL DEFAULT '',
    head_sequence     BIGINT NOT NULL DEFAULT 0,
    leaf_entry_id     TEXT,
    lineage_epoch     BIGINT NOT NULL DEFAULT 0,
    model_preference  TEXT,
    inbox_state       TEXT NOT NULL DEFAULT 'done',
    -- 0 needs_you, 1 running, 2 settled (errored or done): the inbox order.
    inbox_rank        BIGINT NOT NULL DEFAULT 2,
    -- The lowest id of a command still open; NULL when none is.
    open_from         TEXT,
    PRIMARY KEY (agent_id, id)
);

CREATE UNIQUE INDEX sessions_by_create_request ON sessions (agent_id, create_request_id)
    WHERE create_request_id IS NOT NULL;
CREATE INDEX sessions_by_inbox ON sessions (agent_id, inbox_rank, last_activity_at DESC, id);

CREATE TABLE entries (
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id         TEXT NOT NULL,
    parent_id  TEXT,
    sequence   BIGINT NOT NULL,
    command_id TEXT,
    message    TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX entries_by_sequence ON entries (agent_id, session_id, sequence);

CREATE TABLE commands (
    agent_id          TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    id                TEXT NOT NULL,
    request_id        TEXT,
    origin            TEXT,
    kind              TEXT NOT NULL,
    payload           TEXT NOT NULL,
    accepted_sequence BIGINT NOT NULL,
    state             TEXT NOT NULL,
    run_id            TEXT,
    recoveries        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, session_id, id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

-- Idempotency of commands: one command per (Session, request id), whichever
-- process accepted it.
CREATE UNIQUE INDEX commands_by_request ON commands (agent_id, session_id, request_id)
    WHERE request_id IS NOT NULL;

CREATE TABLE terminals (
    agent_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    sequence     BIGINT NOT NULL,
    diagnostic   TEXT,
    anchor_entry TEXT,
    PRIMARY KEY (agent_id, session_id, command_id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX terminals_by_sequence ON terminals (agent_id, session_id, sequence);

CREATE TABLE compactions (
    agent_id          TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    id                TEXT NOT NULL,
    commit_sequence   BIGINT NOT NULL,
    first_kept_entry  TEXT NOT NULL,
    precedes_sequence BIGINT NOT NULL,
    at                BIGINT NOT NULL,
    summary           TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX compactions_by_sequence ON compactions (agent_id, session_id, commit_sequence);

CREATE TABLE sandbox_failures (
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id         TEXT NOT NULL,
    sequence   BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    capability TEXT NOT NULL,
    message    TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX sandbox_failures_by_sequence ON sandbox_failures (agent_id, session_id, sequence);

-- Extension state: scope is 'session' (scope_id the Session) or 'agent' (scope_id '').
CREATE TABLE extension_rows (
    agent_id     TEXT NOT NULL,
    extension_id TEXT NOT NULL,
    scope        TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    collection   TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (agent_id, extension_id, scope, scope_id, collection, key)
);

CREATE INDEX extension_rows_by_scope ON extension_rows (agent_id, scope_id, extension_id);

CREATE TABLE extension_status (
    agent_id       TEXT NOT NULL,
    extension_id   TEXT NOT NULL,
    revision       TEXT NOT NULL,
    schema_version BIGINT NOT NULL,
    stopped_reason TEXT,
    PRIMARY KEY (agent_id, extension_id)
);

CREATE TABLE extension_requests (
    agent_id     TEXT NOT NULL,
    extension_id TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    payload      TEXT NOT NULL,
    response     TEXT NOT NULL,
    PRIMARY KEY (agent_id, extension_id, scope_id, request_id)
);

CREATE TABLE attention (
    agent_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    extension_id TEXT NOT NULL,
    kind         TEXT NOT NULL,
    inbox        BOOLEAN NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, extension_id, kind),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

-- Durable timers. Every firing is claimed by one conditional write (the due time
-- the firing saw), so of several processes exactly one fires each occurrence.
CREATE TABLE timers (
    agent_id     TEXT NOT NULL,
    id           TEXT NOT NULL,
    extension_id TEXT NOT NULL,
    session_id   TEXT,
    due_at       BIGINT NOT NULL,
    cadence      TEXT,
    payload      TEXT NOT NULL,
    kind         TEXT NOT NULL DEFAULT 'hook',
    PRIMARY KEY (agent_id, id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE INDEX timers_by_due ON timers (agent_id, due_at);

-- One lease per Session with a live owner. `holder` names the owning process;
-- `token` grows by one every time the lease is taken, and every commit of the owner
-- checks it, so a stale owner's commit never lands. Expiry is the database's clock,
-- so processes need not agree on time.
--
-- Locks: a commit checks the token under FOR KEY SHARE. The unique index on
-- (agent_id, session_id, token) makes `token` a key column, so taking the lease
-- (which changes the token) waits for commits in flight, while renewing it (which
-- changes only the expiry) does not, and cannot deadlock with them.
CREATE TABLE session_leases (
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    holder     TEXT,
    token      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, session_id),
    FOREIGN KEY (agent_id, session_id) REFERENCES sessions (agent_id, id) ON DELETE CASCADE
);

CREATE INDEX session_leases_by_holder ON session_leases (agent_id, holder);
CREATE UNIQUE INDEX session_leases_token ON session_leases (agent_id, session_id, token);

-- Requests for a Session's owner from another process, and their answers.
CREATE TABLE forwarded_requests (
    id         BIGSERIAL PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request    TEXT NOT NULL,
    answer     TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX forwarded_requests_waiting ON forwarded_requests (agent_id, session_id, id)
    WHERE answer IS NULL;
