-- Lineage entries in fewer bytes (docs/benchmarks.md, "bytes per run"):
-- * a Session gets a small integer key, and entries are keyed by that key and their
--   sequence instead of repeating the Session's text id in every row and index;
-- * an entry names its parent by the parent's sequence (an entry's parent is always
--   in its own Session), which is also the key the lineage walk follows;
-- * `message` holds the stored bytes of the message (src/store/packed.rs):
--   rows copied here stay plain JSON, which reads as before.
ALTER TABLE sessions ADD COLUMN key INTEGER;
UPDATE sessions SET key = rowid;
CREATE UNIQUE INDEX sessions_by_key ON sessions (key);

CREATE TABLE entries_keyed (
    session_key     INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    sequence        INTEGER NOT NULL,
    id              TEXT NOT NULL,
    parent_sequence INTEGER,
    command_id      TEXT,
    message         BLOB NOT NULL,
    PRIMARY KEY (session_key, sequence)
) WITHOUT ROWID;

INSERT INTO entries_keyed (session_key, sequence, id, parent_sequence, command_id, message)
SELECT s.key, e.sequence, e.id, p.sequence, e.command_id, e.message
FROM entries e
JOIN sessions s ON s.id = e.session_id
LEFT JOIN entries p ON p.session_id = e.session_id AND p.id = e.parent_id;

DROP TABLE entries;
ALTER TABLE entries_keyed RENAME TO entries;
CREATE UNIQUE INDEX entries_by_id ON entries (session_key, id);

-- The rows the store reads: an entry with its Session's id and its parent's id.
CREATE VIEW entry_rows AS
SELECT s.id AS session_id, e.session_key, e.sequence, e.id, p.id AS parent_id,
       e.parent_sequence, e.command_id, e.message
FROM entries e
JOIN sessions s ON s.key = e.session_key
LEFT JOIN entries p ON p.session_key = e.session_key AND p.sequence = e.parent_sequence;
