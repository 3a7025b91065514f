-- An acceptance writes fewer pages (docs/benchmarks.md):
-- * the partial index of open commands is replaced by a watermark in the Session
--   header, `open_from`: the lowest id of a command still open. Loading scans the
--   Session's commands from there, and a Session without open work scans none.
-- * request ids are indexed request id first: ids minted as ULIDs land at the
--   right edge, so one group commit of many Sessions shares the index pages.
DROP INDEX commands_open;
DROP INDEX commands_by_request;
CREATE UNIQUE INDEX commands_by_request ON commands (request_id, session_id)
    WHERE request_id IS NOT NULL;
ALTER TABLE sessions ADD COLUMN open_from TEXT;
UPDATE sessions SET open_from = (
    SELECT MIN(commands.id) FROM commands
    WHERE commands.session_id = sessions.id AND commands.state <> 'settled'
);
