-- The extension host: namespaced state, statuses, human request receipts,
-- attention, admission origins and durable timers.

-- One row per key of an extension's collection. scope is 'session' (scope_id is
-- the Session) or 'agent' (scope_id is '').
CREATE TABLE extension_rows (
    extension_id TEXT NOT NULL,
    scope        TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    collection   TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (extension_id, scope, scope_id, collection, key)
) WITHOUT ROWID;

CREATE TABLE extension_status (
    extension_id   TEXT PRIMARY KEY NOT NULL,
    revision       TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    stopped_reason TEXT
) WITHOUT ROWID;

-- Receipts of human commands, so an exact retry answers the first result.
CREATE TABLE extension_requests (
    extension_id TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    payload      TEXT NOT NULL,
    response     TEXT NOT NULL,
    PRIMARY KEY (extension_id, scope_id, request_id)
) WITHOUT ROWID;

CREATE TABLE attention (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    extension_id TEXT NOT NULL,
    kind         TEXT NOT NULL,
    inbox        INTEGER NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (session_id, extension_id, kind)
) WITHOUT ROWID;

-- Durable timers: fired by one scheduler per Agent, each firing claimed by the
-- transaction that runs its hook (the claim moves or deletes the row).
CREATE TABLE timers (
    id           TEXT PRIMARY KEY NOT NULL,
    extension_id TEXT NOT NULL,
    session_id   TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    due_at       INTEGER NOT NULL,
    cadence      TEXT,
    payload      TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX timers_by_due ON timers (due_at);

ALTER TABLE commands ADD COLUMN origin TEXT;
