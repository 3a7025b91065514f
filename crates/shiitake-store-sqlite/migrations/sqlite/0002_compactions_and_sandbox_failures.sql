-- Compaction boundaries (the transcript keeps every message; the model's context
-- starts at `first_kept_entry` after the summary) and sandbox failure events.

CREATE TABLE compactions (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id                TEXT NOT NULL,
    commit_sequence   INTEGER NOT NULL,
    first_kept_entry  TEXT NOT NULL,
    precedes_sequence INTEGER NOT NULL,
    at                INTEGER NOT NULL,
    summary           TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE UNIQUE INDEX compactions_by_sequence ON compactions (session_id, commit_sequence);

CREATE TABLE sandbox_failures (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id         TEXT NOT NULL,
    sequence   INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    capability TEXT NOT NULL,
    message    TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE UNIQUE INDEX sandbox_failures_by_sequence ON sandbox_failures (session_id, sequence);
