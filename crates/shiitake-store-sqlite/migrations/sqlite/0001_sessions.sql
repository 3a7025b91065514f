-- Sessions, their lineage, accepted commands and terminals.
-- Every committed change of a Session takes the next `sequence` of that Session.

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY NOT NULL,
    create_request_id TEXT UNIQUE,
    created_at        INTEGER NOT NULL,
    last_activity_at  INTEGER NOT NULL,
    settled_at        INTEGER,
    title             TEXT NOT NULL DEFAULT '',
    head_sequence     INTEGER NOT NULL DEFAULT 0,
    leaf_entry_id     TEXT,
    lineage_epoch     INTEGER NOT NULL DEFAULT 0,
    model_preference  TEXT,
    inbox_state       TEXT NOT NULL DEFAULT 'done',
    -- 0 needs_you, 1 running, 2 settled (errored or done): the inbox order.
    inbox_rank        INTEGER NOT NULL DEFAULT 2
);

CREATE INDEX sessions_by_inbox ON sessions (inbox_rank, last_activity_at DESC, id);

-- Lineage entries form a tree per Session (parent_id); the selected path is
-- the chain of parents from sessions.leaf_entry_id.
CREATE TABLE entries (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id         TEXT NOT NULL,
    parent_id  TEXT,
    sequence   INTEGER NOT NULL,
    command_id TEXT,
    message    TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX entries_by_sequence ON entries (session_id, sequence);

-- Accepted commands that carry work or a request id: prompts and operator lines.
CREATE TABLE commands (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id                TEXT NOT NULL,
    request_id        TEXT,
    kind              TEXT NOT NULL,
    payload           TEXT NOT NULL,
    accepted_sequence INTEGER NOT NULL,
    state             TEXT NOT NULL,
    run_id            TEXT,
    recoveries        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX commands_by_request ON commands (session_id, request_id)
    WHERE request_id IS NOT NULL;

CREATE TABLE terminals (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    command_id   TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    sequence     INTEGER NOT NULL,
    diagnostic   TEXT,
    anchor_entry TEXT,
    PRIMARY KEY (session_id, command_id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX terminals_by_sequence ON terminals (session_id, sequence);

-- Only open commands are indexed for loading; settled ones leave the index.
CREATE INDEX commands_open ON commands (session_id, accepted_sequence) WHERE state <> 'settled';
