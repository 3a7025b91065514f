//! Every statement of both stores, written once (`[…]` keys by the tenant, `$1` is
//! the tenant: see `dialect.rs`). The parameters each takes are listed where
//! they are bound (`encode.rs`, `reads.rs`).

use crate::dialect::Statement;

// ---- Sessions: $2 id, $3 created_at .. $13 open_from (the header), $14 create_request_id.

/// SQLite gives each Session the next integer key (migration 0007), which its entries are keyed by.
pub(crate) static CREATE_SESSION: Statement = Statement::each(
    "INSERT INTO sessions (key, id, created_at, last_activity_at, settled_at, title, \
     head_sequence, leaf_entry_id, lineage_epoch, model_preference, inbox_state, inbox_rank, \
     open_from, create_request_id) VALUES ((SELECT IFNULL(MAX(key), 0) + 1 FROM sessions), \
     $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    "INSERT INTO sessions (agent_id, id, created_at, last_activity_at, settled_at, title, \
     head_sequence, leaf_entry_id, lineage_epoch, model_preference, inbox_state, inbox_rank, \
     open_from, create_request_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
);
/// The header is written whole.
/// The header's columns, `$3` .. `$13`, as both header updates set them.
macro_rules! set_header {
    () => {
        "UPDATE sessions SET created_at = $3, last_activity_at = $4, settled_at = $5, \
         title = $6, head_sequence = $7, leaf_entry_id = $8, lineage_epoch = $9, \
         model_preference = $10, inbox_state = $11, inbox_rank = $12, open_from = $13 "
    };
}
pub(crate) static PUT_HEADER: Statement =
    Statement::new(concat!(set_header!(), "WHERE [agent_id = $1 AND ]id = $2"));
/// PostgreSQL only: [`PUT_HEADER`] that changes the row only while the Session's lease
/// has the owner's token (`$14`) and holder (`$15`), so the commit's fence costs no
/// statement of its own; found nothing means fenced, as [`FENCE`] would have said.
pub(crate) static PUT_HEADER_FENCED: Statement = Statement::new(concat!(
    set_header!(),
    "WHERE agent_id = $1 AND id = $2 AND EXISTS (SELECT 1 FROM session_leases \
     WHERE agent_id = $1 AND session_id = $2 AND token = $14 AND holder = $15 FOR KEY SHARE)"
));
pub(crate) static DELETE_SESSION: Statement =
    Statement::new("DELETE FROM sessions WHERE [agent_id = $1 AND ]id = $2");
/// PostgreSQL only: requests forwarded to the Session's owner have no foreign key.
pub(crate) static DELETE_FORWARDED: Statement =
    Statement::new("DELETE FROM forwarded_requests WHERE agent_id = $1 AND session_id = $2");
/// PostgreSQL only: the lease still has this token ($3) and holder ($4). The key-share
/// lock holds off a takeover (which changes the token, a key column) until the commit
/// ends, so the new owner loads after it; renewals (only the expiry) pass.
pub(crate) static FENCE: Statement = Statement::new(
    "SELECT 1 FROM session_leases WHERE agent_id = $1 AND session_id = $2 AND token = $3 \
     AND holder = $4 FOR KEY SHARE",
);

// ---- Commands: $2 session_id, $3 id, then the columns.

pub(crate) static INSERT_COMMAND: Statement = Statement::new(
    "INSERT INTO commands ([agent_id, ]session_id, id, request_id, kind, payload, \
     accepted_sequence, state, run_id, recoveries, origin) \
     VALUES ([$1, ]$2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
);
pub(crate) static SET_COMMAND_STATE: Statement = Statement::new(
    "UPDATE commands SET state = $4, run_id = COALESCE($5, run_id) \
     WHERE [agent_id = $1 AND ]session_id = $2 AND id = $3",
);
pub(crate) static COUNT_RECOVERY: Statement = Statement::new(
    "UPDATE commands SET recoveries = recoveries + 1 \
     WHERE [agent_id = $1 AND ]session_id = $2 AND id = $3",
);

// ---- Entries: $2 session_id, $3 id, $4 sequence, $5 command_id, $6 message, $7 parent.
// SQLite names the parent by its sequence. A root entry is inserted by selecting its
// Session's row, so it changes no row when the Session is not there. A child reads its
// parent's key and sequence in scalar subqueries: an `INSERT … SELECT` from `entries`
// into `entries` would make SQLite copy the selection into a temporary table first.
// A missing parent leaves `session_key` NULL, which its NOT NULL refuses, and the
// writer reads that refusal of a claim as a claim that found nothing.

pub(crate) static INSERT_ROOT_ENTRY: Statement = Statement::each(
    "INSERT INTO entries (session_key, sequence, id, parent_sequence, command_id, message) \
     SELECT key, $4, $3, NULL, $5, $6 FROM sessions WHERE id = $2",
    "INSERT INTO entries (agent_id, session_id, id, parent_id, sequence, command_id, message) \
     VALUES ($1, $2, $3, NULL, $4, $5, $6)",
);
pub(crate) static INSERT_CHILD_ENTRY: Statement = Statement::each(
    "INSERT INTO entries (session_key, sequence, id, parent_sequence, command_id, message) \
     VALUES ((SELECT p.session_key FROM entries p \
     WHERE p.session_key = (SELECT key FROM sessions WHERE id = $2) AND p.id = $7), \
     $4, $3, (SELECT p.sequence FROM entries p \
     WHERE p.session_key = (SELECT key FROM sessions WHERE id = $2) AND p.id = $7), $5, $6)",
    "INSERT INTO entries (agent_id, session_id, id, parent_id, sequence, command_id, message) \
     VALUES ($1, $2, $3, $7, $4, $5, $6)",
);

/// The commit statements that change rows of one Session alone, named by `$2`, and
/// bind only plain values: a writer may run one of them for many Sessions at once, as
/// one statement over arrays (PostgreSQL's writer does, `writer/fold.rs` there).
/// Statements that read or write rows other Sessions share (extension rows, timers,
/// the Session's creation, which a unique request id may refuse) are not among them.
pub(crate) static PER_SESSION: [&Statement; 7] = [
    &PUT_HEADER,
    &PUT_HEADER_FENCED,
    &INSERT_COMMAND,
    &SET_COMMAND_STATE,
    &INSERT_ROOT_ENTRY,
    &INSERT_CHILD_ENTRY,
    &INSERT_TERMINAL,
];

// ---- Sequenced events of a Session: $2 session_id, then the columns.

pub(crate) static INSERT_TERMINAL: Statement = Statement::new(
    "INSERT INTO terminals ([agent_id, ]session_id, command_id, outcome, sequence, diagnostic, \
     anchor_entry) VALUES ([$1, ]$2, $3, $4, $5, $6, $7)",
);
pub(crate) static INSERT_COMPACTION: Statement = Statement::new(
    "INSERT INTO compactions ([agent_id, ]session_id, id, commit_sequence, first_kept_entry, \
     precedes_sequence, at, summary) VALUES ([$1, ]$2, $3, $4, $5, $6, $7, $8)",
);
pub(crate) static INSERT_SANDBOX_FAILURE: Statement = Statement::new(
    "INSERT INTO sandbox_failures ([agent_id, ]session_id, id, sequence, at, capability, \
     message) VALUES ([$1, ]$2, $3, $4, $5, $6, $7)",
);

// ---- Extension rows: $2 extension_id, $3 scope, $4 scope_id, $5 collection, $6 key, $7 value.

pub(crate) static PUT_EXTENSION_ROW: Statement = Statement::new(
    "INSERT INTO extension_rows ([agent_id, ]extension_id, scope, scope_id, collection, key, \
     value) VALUES ([$1, ]$2, $3, $4, $5, $6, $7) \
     ON CONFLICT ([agent_id, ]extension_id, scope, scope_id, collection, key) \
     DO UPDATE SET value = excluded.value",
);
pub(crate) static INSERT_EXTENSION_ROW: Statement = Statement::new(
    "INSERT INTO extension_rows ([agent_id, ]extension_id, scope, scope_id, collection, key, \
     value) VALUES ([$1, ]$2, $3, $4, $5, $6, $7)",
);
pub(crate) static DELETE_EXTENSION_ROW: Statement = Statement::new(
    "DELETE FROM extension_rows WHERE [agent_id = $1 AND ]extension_id = $2 AND scope = $3 \
     AND scope_id = $4 AND collection = $5 AND key = $6",
);
pub(crate) static DELETE_EXTENSION_ROWS: Statement =
    Statement::new("DELETE FROM extension_rows WHERE [agent_id = $1 AND ]extension_id = $2");
pub(crate) static PUT_EXTENSION_STATUS: Statement = Statement::new(
    "INSERT INTO extension_status ([agent_id, ]extension_id, revision, schema_version, \
     stopped_reason) VALUES ([$1, ]$2, $3, $4, $5) ON CONFLICT ([agent_id, ]extension_id) \
     DO UPDATE SET revision = excluded.revision, schema_version = excluded.schema_version, \
     stopped_reason = excluded.stopped_reason",
);
pub(crate) static PUT_EXTENSION_REQUEST: Statement = Statement::new(
    "INSERT INTO extension_requests ([agent_id, ]extension_id, scope_id, request_id, payload, \
     response) VALUES ([$1, ]$2, $3, $4, $5, $6)",
);

// ---- Attention: $2 session_id, $3 extension_id, $4 kind, $5 inbox, $6 text.

pub(crate) static PUT_ATTENTION: Statement = Statement::new(
    "INSERT INTO attention ([agent_id, ]session_id, extension_id, kind, inbox, text) \
     VALUES ([$1, ]$2, $3, $4, $5, $6) ON CONFLICT ([agent_id, ]session_id, extension_id, kind) \
     DO UPDATE SET inbox = excluded.inbox, text = excluded.text",
);
pub(crate) static DELETE_ATTENTION: Statement = Statement::new(
    "DELETE FROM attention WHERE [agent_id = $1 AND ]session_id = $2 AND extension_id = $3 \
     AND kind = $4",
);

// ---- Timers: $2 id. A claim changes its row only while it is still due at $3.

pub(crate) static PUT_TIMER: Statement = Statement::new(
    "INSERT INTO timers ([agent_id, ]id, extension_id, session_id, due_at, cadence, payload, \
     kind) VALUES ([$1, ]$2, $3, $4, $5, $6, $7, $8)",
);
pub(crate) static DELETE_TIMER: Statement =
    Statement::new("DELETE FROM timers WHERE [agent_id = $1 AND ]id = $2 AND extension_id = $3");
pub(crate) static CLAIM_TIMER_MOVE: Statement = Statement::new(
    "UPDATE timers SET due_at = $4 WHERE [agent_id = $1 AND ]id = $2 AND due_at = $3",
);
pub(crate) static CLAIM_TIMER_DELETE: Statement =
    Statement::new("DELETE FROM timers WHERE [agent_id = $1 AND ]id = $2 AND due_at = $3");

// ---- Reads.

pub(crate) static SESSION_BY_REQUEST: Statement =
    Statement::new("SELECT id FROM sessions WHERE [agent_id = $1 AND ]create_request_id = $2");
pub(crate) static SESSION_EXISTS: Statement =
    Statement::new("SELECT id FROM sessions WHERE [agent_id = $1 AND ]id = $2");
pub(crate) static SESSION_HEADER: Statement = Statement::new(
    "SELECT id, created_at, last_activity_at, settled_at, title, head_sequence, leaf_entry_id, \
     lineage_epoch, model_preference, inbox_state, inbox_rank, open_from \
     FROM sessions WHERE [agent_id = $1 AND ]id = $2",
);
/// The rows of an inbox page after position ($2 rank, $3 last activity, $4 id) if any.
macro_rules! inbox_after {
    () => {
        "SELECT id, created_at, last_activity_at, settled_at, title, head_sequence, \
         leaf_entry_id, lineage_epoch, model_preference, inbox_state, inbox_rank, open_from \
         FROM sessions WHERE [agent_id = $1 AND ](CAST($2 AS BIGINT) IS NULL \
           OR inbox_rank > $2 \
           OR (inbox_rank = $2 AND last_activity_at < $3) \
           OR (inbox_rank = $2 AND last_activity_at = $3 AND id > $4)) "
    };
}
/// One inbox page, at most $5 rows. PostgreSQL's inbox index holds the activity's second,
/// not its millisecond (so a header rewrite within a second is HOT: migration 0005), and
/// orders by it first: the same order, read from the index a second at a time.
pub(crate) static LIST_SESSIONS: Statement = Statement::each(
    concat!(
        inbox_after!(),
        "ORDER BY inbox_rank, last_activity_at DESC, id LIMIT $5"
    ),
    concat!(
        inbox_after!(),
        "ORDER BY inbox_rank, activity_second DESC, last_activity_at DESC, id LIMIT $5"
    ),
);
pub(crate) static SESSIONS_WITH_OPEN_WORK: Statement =
    Statement::new("SELECT id FROM sessions WHERE [agent_id = $1 AND ]inbox_rank <= 1");
/// Every open command's id is at or after the watermark $3, so the scan skips the
/// settled history before it.
pub(crate) static OPEN_COMMANDS: Statement = Statement::new(
    "SELECT id, request_id, origin, kind, payload, accepted_sequence, state, run_id, recoveries \
     FROM commands WHERE [agent_id = $1 AND ]session_id = $2 AND id >= $3 \
     AND state <> 'settled' ORDER BY accepted_sequence",
);
pub(crate) static COMMAND_BY_REQUEST: Statement = Statement::new(
    "SELECT id, request_id, origin, kind, payload, accepted_sequence, state, run_id, recoveries \
     FROM commands WHERE [agent_id = $1 AND ]session_id = $2 AND request_id = $3",
);

// Entries are read with their Session's id and their parent's id: SQLite's `entry_rows`
// view adds both to its integer-keyed rows; PostgreSQL's rows carry them.

pub(crate) static ENTRY: Statement = Statement::each(
    "SELECT id, parent_id, sequence, command_id, message FROM entry_rows \
     WHERE session_id = $2 AND id = $3",
    "SELECT id, parent_id, sequence, command_id, message FROM entries \
     WHERE agent_id = $1 AND session_id = $2 AND id = $3",
);
pub(crate) static ENTRY_AT: Statement = Statement::each(
    "SELECT id, parent_id, sequence, command_id, message FROM entry_rows \
     WHERE session_id = $2 AND sequence = $3",
    "SELECT id, parent_id, sequence, command_id, message FROM entries \
     WHERE agent_id = $1 AND session_id = $2 AND sequence = $3",
);
pub(crate) static ENTRIES_AFTER: Statement = Statement::each(
    "SELECT id, parent_id, sequence, command_id, message FROM entry_rows \
     WHERE session_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4",
    "SELECT id, parent_id, sequence, command_id, message FROM entries \
     WHERE agent_id = $1 AND session_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4",
);
/// From entry $3 towards the root, at most $4 entries, newest first. SQLite walks
/// parent sequences through the primary key, then reads each entry of the path once.
pub(crate) static LINEAGE: Statement = Statement::each(
    "WITH RECURSIVE path (session_key, sequence, parent_sequence, depth) AS ( \
       SELECT session_key, sequence, parent_sequence, 1 FROM entries \
         WHERE session_key = (SELECT key FROM sessions WHERE id = $2) AND id = $3 \
       UNION ALL \
       SELECT e.session_key, e.sequence, e.parent_sequence, p.depth + 1 \
         FROM entries e JOIN path p \
           ON e.session_key = p.session_key AND e.sequence = p.parent_sequence \
         WHERE p.depth < $4 \
     ) SELECT r.id, r.parent_id, r.sequence, r.command_id, r.message \
       FROM path JOIN entry_rows r \
         ON r.session_key = path.session_key AND r.sequence = path.sequence \
       ORDER BY path.depth",
    "WITH RECURSIVE path (id, parent_id, sequence, command_id, message, depth) AS ( \
       SELECT id, parent_id, sequence, command_id, message, 1 FROM entries \
         WHERE agent_id = $1 AND session_id = $2 AND id = $3 \
       UNION ALL \
       SELECT e.id, e.parent_id, e.sequence, e.command_id, e.message, p.depth + 1 \
         FROM entries e JOIN path p \
           ON e.agent_id = $1 AND e.session_id = $2 AND e.id = p.parent_id \
         WHERE p.depth < $4 \
     ) SELECT id, parent_id, sequence, command_id, message FROM path ORDER BY depth",
);

/// Sequence in ($3, $4], at most $5.
pub(crate) static TERMINALS_BETWEEN: Statement = Statement::new(
    "SELECT command_id, outcome, sequence, diagnostic, anchor_entry FROM terminals \
     WHERE [agent_id = $1 AND ]session_id = $2 AND sequence > $3 AND sequence <= $4 \
     ORDER BY sequence LIMIT $5",
);
/// Sequence in ($3, $4], at most $5.
pub(crate) static SANDBOX_FAILURES_BETWEEN: Statement = Statement::new(
    "SELECT id, sequence, at, capability, message FROM sandbox_failures \
     WHERE [agent_id = $1 AND ]session_id = $2 AND sequence > $3 AND sequence <= $4 \
     ORDER BY sequence LIMIT $5",
);
pub(crate) static COMPACTIONS: Statement = Statement::new(
    "SELECT id, commit_sequence, first_kept_entry, precedes_sequence, at, summary \
     FROM compactions WHERE [agent_id = $1 AND ]session_id = $2 ORDER BY commit_sequence",
);

// One statement per shape of `extension_rows`, so each uses its index (the primary key
// leads with the extension, `extension_rows_by_scope` with the scope id).

pub(crate) static EXTENSION_ROWS: Statement = Statement::new(
    "SELECT extension_id, scope, scope_id, collection, key, value FROM extension_rows\
     [ WHERE agent_id = $1]",
);
pub(crate) static EXTENSION_ROWS_OF: Statement = Statement::new(
    "SELECT extension_id, scope, scope_id, collection, key, value FROM extension_rows \
     WHERE [agent_id = $1 AND ]extension_id = $2",
);
pub(crate) static EXTENSION_ROWS_IN: Statement = Statement::new(
    "SELECT extension_id, scope, scope_id, collection, key, value FROM extension_rows \
     WHERE [agent_id = $1 AND ]scope_id = $2 AND scope = $3",
);
pub(crate) static EXTENSION_ROWS_OF_IN: Statement = Statement::new(
    "SELECT extension_id, scope, scope_id, collection, key, value FROM extension_rows \
     WHERE [agent_id = $1 AND ]extension_id = $2 AND scope_id = $3 AND scope = $4",
);
pub(crate) static EXTENSION_STATUSES: Statement = Statement::new(
    "SELECT extension_id, revision, schema_version, stopped_reason FROM extension_status\
     [ WHERE agent_id = $1]",
);
pub(crate) static EXTENSION_REQUEST: Statement = Statement::new(
    "SELECT payload, response FROM extension_requests \
     WHERE [agent_id = $1 AND ]extension_id = $2 AND scope_id = $3 AND request_id = $4",
);
pub(crate) static ATTENTION: Statement = Statement::new(
    "SELECT extension_id, kind, inbox, text FROM attention \
     WHERE [agent_id = $1 AND ]session_id = $2",
);
pub(crate) static NEXT_TIMER: Statement = Statement::new(
    "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
     [WHERE agent_id = $1 ]ORDER BY due_at LIMIT 1",
);
pub(crate) static DUE_TIMERS: Statement = Statement::new(
    "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
     WHERE [agent_id = $1 AND ]due_at <= $2 ORDER BY due_at LIMIT $3",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    /// Every statement both dialects run.
    const SHARED: &[&Statement] = &[
        &CREATE_SESSION,
        &PUT_HEADER,
        &DELETE_SESSION,
        &INSERT_COMMAND,
        &SET_COMMAND_STATE,
        &COUNT_RECOVERY,
        &INSERT_ROOT_ENTRY,
        &INSERT_CHILD_ENTRY,
        &INSERT_TERMINAL,
        &INSERT_COMPACTION,
        &INSERT_SANDBOX_FAILURE,
        &PUT_EXTENSION_ROW,
        &INSERT_EXTENSION_ROW,
        &DELETE_EXTENSION_ROW,
        &DELETE_EXTENSION_ROWS,
        &PUT_EXTENSION_STATUS,
        &PUT_EXTENSION_REQUEST,
        &PUT_ATTENTION,
        &DELETE_ATTENTION,
        &PUT_TIMER,
        &DELETE_TIMER,
        &CLAIM_TIMER_MOVE,
        &CLAIM_TIMER_DELETE,
        &SESSION_BY_REQUEST,
        &SESSION_EXISTS,
        &SESSION_HEADER,
        &LIST_SESSIONS,
        &SESSIONS_WITH_OPEN_WORK,
        &OPEN_COMMANDS,
        &COMMAND_BY_REQUEST,
        &ENTRY,
        &ENTRY_AT,
        &ENTRIES_AFTER,
        &LINEAGE,
        &TERMINALS_BETWEEN,
        &SANDBOX_FAILURES_BETWEEN,
        &COMPACTIONS,
        &EXTENSION_ROWS,
        &EXTENSION_ROWS_OF,
        &EXTENSION_ROWS_IN,
        &EXTENSION_ROWS_OF_IN,
        &EXTENSION_STATUSES,
        &EXTENSION_REQUEST,
        &ATTENTION,
        &NEXT_TIMER,
        &DUE_TIMERS,
    ];

    /// The parameter numbers a rendered text uses, sorted and without repeats.
    fn parameters(text: &str, mark: char) -> Vec<usize> {
        let mut found: Vec<usize> = text
            .split(mark)
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .map(|digits| digits.parse().unwrap())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    #[test]
    fn sqlite_texts_number_their_parameters_from_one_without_gaps() {
        // rusqlite binds positionally and checks the count against the largest number.
        for statement in SHARED {
            let text = statement.text(Dialect::Sqlite);
            assert!(!text.contains(['[', ']', '$']), "{text}");
            let found = parameters(text, '?');
            let expected: Vec<usize> = (1..=found.len()).collect();
            assert_eq!(found, expected, "{text}");
        }
    }

    #[test]
    fn postgres_texts_key_by_the_tenant_and_number_from_it() {
        for statement in SHARED
            .iter()
            .chain([&&FENCE, &&PUT_HEADER_FENCED, &&DELETE_FORWARDED])
        {
            let text = statement.text(Dialect::Postgres);
            assert!(!text.contains(['[', ']', '?']), "{text}");
            assert!(
                text.contains("agent_id = $1") || text.contains("$1, "),
                "{text}"
            );
            let found = parameters(text, '$');
            let expected: Vec<usize> = (1..=found.len()).collect();
            assert_eq!(found, expected, "{text}");
        }
    }

    #[test]
    fn both_dialects_take_the_same_parameters() {
        for statement in SHARED {
            let sqlite = parameters(statement.text(Dialect::Sqlite), '?').len();
            let postgres = parameters(statement.text(Dialect::Postgres), '$').len();
            assert_eq!(sqlite + 1, postgres, "{statement:?}");
        }
    }
}
