//! The single SQLite writer: every commit of an Agent goes through one thread.
//!
//! Owners hand their op lists to this thread; it takes whatever is waiting (up
//! to a bound) and commits it in one transaction (group commit), then answers
//! each caller. Inside a group each request runs under its own savepoint, so one
//! bad request is rolled back alone and cannot fail the others. One writer means
//! no "database is locked" and more than one commit per fsync.
//!
//! The writer is a plain thread on a `rusqlite` connection rather than an async
//! sqlx connection: sqlx hands every statement to a worker thread and back, and
//! those hand-offs, not SQLite, were most of the cost of an acceptance (see
//! docs/benchmarks.md). Here a commit costs one hand-off in and one answer out.
//! rusqlite and sqlx link the same SQLite (`libsqlite3-sys`, which Cargo allows
//! only once in a build because it `links = "sqlite3"`): one copy of SQLite in the
//! process matters, because two would not see each other's POSIX locks.

use std::path::Path;
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, Value as SqlValue};
use rusqlite::{Connection, OpenFlags, ToSql, params_from_iter};
use shiitake_protocol::TerminalOutcome;
use tokio::sync::{mpsc, oneshot};

use super::Durability;
use super::rows::{inbox_state_str, int};
use crate::store::{Op, SessionHeader, StoreError, inbox_rank};

/// One caller's commit.
pub(crate) struct WriteRequest {
    pub(crate) ops: Vec<Op>,
    pub(crate) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Most requests committed in one transaction.
const MAX_GROUP: usize = 256;

/// Prepared statements the writer keeps: every statement shape it writes, with room.
const STATEMENT_CACHE: usize = 64;

/// Opens the writer's connection on the database the migrations just prepared.
pub(crate) fn open(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", durability.pragma())?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Runs on the writer thread until every sender is dropped, then closes the connection.
pub(crate) fn run(conn: Connection, mut requests: mpsc::Receiver<WriteRequest>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = requests.blocking_recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match requests.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        let results = commit_group(&conn, &group);
        for (request, result) in group.drain(..).zip(results) {
            // The caller may have given up waiting (its task was cancelled); the commit stands.
            if request.reply.send(result).is_err() {
                tracing::trace!("a committer left before its answer");
            }
        }
    }
    if let Err((_, error)) = conn.close() {
        tracing::warn!(%error, "closing the SQLite writer connection");
    }
}

/// Commits `group` in one transaction and returns each request's outcome, in order.
fn commit_group(conn: &Connection, group: &[WriteRequest]) -> Vec<Result<(), StoreError>> {
    let failed_all = |error: &StoreError| group.iter().map(|_| Err(error.duplicate())).collect();
    if let Err(error) = execute(conn, "BEGIN IMMEDIATE") {
        return failed_all(&error);
    }
    let results = match group {
        [only] => vec![apply(conn, &only.ops)],
        _ => {
            let mut results = Vec::with_capacity(group.len());
            for request in group {
                match isolated(conn, &request.ops) {
                    Ok(result) => results.push(result),
                    Err(error) => {
                        // The savepoint machinery itself failed: nothing in this
                        // transaction can be trusted to be whole, so none of it commits.
                        rollback(conn);
                        return failed_all(&error);
                    }
                }
            }
            results
        }
    };
    if results.iter().all(Result::is_err) {
        rollback(conn);
        return results;
    }
    match execute(conn, "COMMIT") {
        Ok(()) => results,
        Err(error) => {
            rollback(conn);
            failed_all(&error)
        }
    }
}

/// Applies one request of a group under a savepoint, undoing only it when it fails.
/// The outer error means the savepoint could not be taken, undone or released.
fn isolated(conn: &Connection, ops: &[Op]) -> Result<Result<(), StoreError>, StoreError> {
    execute(conn, "SAVEPOINT request")?;
    let result = apply(conn, ops);
    if result.is_err() {
        execute(conn, "ROLLBACK TO request")?;
    }
    execute(conn, "RELEASE request")?;
    Ok(result)
}

/// Executes every statement of `ops`, checking claims.
fn apply(conn: &Connection, ops: &[Op]) -> Result<(), StoreError> {
    let mut batch = Vec::new();
    for op in ops {
        statements(&mut batch, op)?;
    }
    for stmt in &batch {
        let changed = conn
            .prepare_cached(stmt.sql)?
            .execute(params_from_iter(&stmt.binds))?;
        if stmt.claim && changed != 1 {
            return Err(StoreError::Conflict(
                "a timer was already claimed".to_owned(),
            ));
        }
    }
    Ok(())
}

fn execute(conn: &Connection, sql: &'static str) -> Result<(), StoreError> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn rollback(conn: &Connection) {
    if let Err(error) = execute(conn, "ROLLBACK") {
        tracing::trace!(%error, "nothing to roll back");
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        let unique = matches!(
            &error,
            rusqlite::Error::SqliteFailure(failure, _)
                if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        );
        StoreError::Write {
            message: error.to_string(),
            unique,
        }
    }
}

impl StoreError {
    /// The same failure for another request of a group that failed as a whole.
    fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Write { message, unique } => StoreError::Write {
                message: message.clone(),
                unique: *unique,
            },
            StoreError::Conflict(message) => StoreError::Conflict(message.clone()),
            StoreError::Corrupt(message) => StoreError::Corrupt(message.clone()),
            other => StoreError::Write {
                message: other.to_string(),
                unique: false,
            },
        }
    }
}

/// A value bound to one statement parameter.
enum Bind {
    Text(String),
    Int(i64),
    Null,
    Bool(bool),
}

impl ToSql for Bind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Bind::Text(text) => ToSqlOutput::from(text.as_str()),
            Bind::Int(value) => ToSqlOutput::from(*value),
            Bind::Null => ToSqlOutput::Owned(SqlValue::Null),
            Bind::Bool(value) => ToSqlOutput::from(*value),
        })
    }
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(value.to_owned())
    }
}

impl From<&String> for Bind {
    fn from(value: &String) -> Self {
        Bind::Text(value.clone())
    }
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Int(value)
    }
}

impl From<bool> for Bind {
    fn from(value: bool) -> Self {
        Bind::Bool(value)
    }
}

impl<T: Into<Bind>> From<Option<T>> for Bind {
    fn from(value: Option<T>) -> Self {
        value.map_or(Bind::Null, Into::into)
    }
}

/// One statement of a batch, with its parameters.
struct Stmt {
    sql: &'static str,
    binds: Vec<Bind>,
    /// The statement must change exactly one row, or the commit fails.
    claim: bool,
}

impl Stmt {
    fn new(sql: &'static str) -> Self {
        Self {
            sql,
            binds: Vec::new(),
            claim: false,
        }
    }

    fn bind(mut self, value: impl Into<Bind>) -> Self {
        self.binds.push(value.into());
        self
    }

    fn claiming(mut self) -> Self {
        self.claim = true;
        self
    }

    fn push(self, batch: &mut Vec<Stmt>) {
        batch.push(self);
    }
}

/// Appends the statements of one op to `batch`.
fn statements(batch: &mut Vec<Stmt>, op: &Op) -> Result<(), StoreError> {
    match op {
        Op::CreateSession { header, request_id } => {
            Stmt::new(
                "INSERT INTO sessions (id, create_request_id, created_at, last_activity_at, \
                 settled_at, title, head_sequence, leaf_entry_id, lineage_epoch, \
                 model_preference, inbox_state, inbox_rank, open_from) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(header.id.as_str())
            .bind(request_id.as_ref().map(|r| r.as_str()))
            .bind(int(header.created_at))
            .bind(int(header.last_activity_at))
            .bind(header.settled_at.map(int))
            .bind(&header.title)
            .bind(int(header.head_sequence))
            .bind(header.leaf.as_ref().map(|l| l.as_str()))
            .bind(int(header.epoch))
            .bind(preference_json(header)?)
            .bind(inbox_state_str(header.inbox_state))
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .bind(header.open_from.as_ref().map(|c| c.as_str()))
            .push(batch);
        }
        Op::PutHeader(header) => {
            Stmt::new(
                "UPDATE sessions SET last_activity_at = ?, settled_at = ?, title = ?, \
                 head_sequence = ?, leaf_entry_id = ?, lineage_epoch = ?, model_preference = ?, \
                 inbox_state = ?, inbox_rank = ?, open_from = ? WHERE id = ?",
            )
            .bind(int(header.last_activity_at))
            .bind(header.settled_at.map(int))
            .bind(&header.title)
            .bind(int(header.head_sequence))
            .bind(header.leaf.as_ref().map(|l| l.as_str()))
            .bind(int(header.epoch))
            .bind(preference_json(header)?)
            .bind(inbox_state_str(header.inbox_state))
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .bind(header.open_from.as_ref().map(|c| c.as_str()))
            .bind(header.id.as_str())
            .push(batch);
        }
        Op::DeleteSession { session_id } => {
            Stmt::new("DELETE FROM sessions WHERE id = ?")
                .bind(session_id.as_str())
                .push(batch);
        }
        Op::PutExtensionRow {
            extension_id,
            scope,
            scope_id,
            collection,
            key,
            value,
        } => {
            Stmt::new(
                "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (extension_id, scope, scope_id, collection, key) \
                 DO UPDATE SET value = excluded.value",
            )
            .bind(extension_id.as_str())
            .bind(*scope)
            .bind(scope_id)
            .bind(collection)
            .bind(key)
            .bind(value.to_string())
            .push(batch);
        }
        Op::DeleteExtensionRow {
            extension_id,
            scope,
            scope_id,
            collection,
            key,
        } => {
            Stmt::new(
                "DELETE FROM extension_rows WHERE extension_id = ? AND scope = ? AND scope_id = ? \
                 AND collection = ? AND key = ?",
            )
            .bind(extension_id.as_str())
            .bind(*scope)
            .bind(scope_id)
            .bind(collection)
            .bind(key)
            .push(batch);
        }
        Op::ReplaceExtensionRows { extension_id, rows } => {
            Stmt::new("DELETE FROM extension_rows WHERE extension_id = ?")
                .bind(extension_id.as_str())
                .push(batch);
            for row in rows {
                Stmt::new(
                    "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(extension_id.as_str())
                .bind(&row.scope)
                .bind(&row.scope_id)
                .bind(&row.collection)
                .bind(&row.key)
                .bind(row.value.to_string())
                .push(batch);
            }
        }
        Op::PutExtensionStatus(status) => {
            Stmt::new(
                "INSERT INTO extension_status (extension_id, revision, schema_version, stopped_reason) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (extension_id) DO UPDATE SET revision = excluded.revision, \
                 schema_version = excluded.schema_version, stopped_reason = excluded.stopped_reason",
            )
            .bind(status.extension_id.as_str())
            .bind(&status.revision)
            .bind(i64::from(status.schema_version))
            .bind(status.stopped_reason.as_deref())
            .push(batch);
        }
        Op::PutExtensionRequest {
            extension_id,
            scope_id,
            request_id,
            payload,
            response,
        } => {
            Stmt::new(
                "INSERT INTO extension_requests (extension_id, scope_id, request_id, payload, response) \
                 VALUES (?, ?, ?, ?, ?)",
            )
            .bind(extension_id.as_str())
            .bind(scope_id)
            .bind(request_id)
            .bind(payload)
            .bind(response.to_string())
            .push(batch);
        }
        Op::PutAttention {
            session_id,
            extension_id,
            kind,
            inbox,
            text,
        } => {
            Stmt::new(
                "INSERT INTO attention (session_id, extension_id, kind, inbox, text) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (session_id, extension_id, kind) DO UPDATE SET inbox = excluded.inbox, \
                 text = excluded.text",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .bind(*inbox)
            .bind(text)
            .push(batch);
        }
        Op::DeleteAttention {
            session_id,
            extension_id,
            kind,
        } => {
            Stmt::new(
                "DELETE FROM attention WHERE session_id = ? AND extension_id = ? AND kind = ?",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .push(batch);
        }
        Op::PutTimer(timer) => {
            Stmt::new(
                "INSERT INTO timers (id, extension_id, session_id, due_at, cadence, payload) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(&timer.id)
            .bind(timer.extension_id.as_str())
            .bind(timer.session_id.as_ref().map(|s| s.as_str()))
            .bind(int(timer.due_at))
            .bind(timer.cadence.as_deref())
            .bind(timer.payload.to_string())
            .push(batch);
        }
        Op::DeleteTimer { extension_id, id } => {
            Stmt::new("DELETE FROM timers WHERE id = ? AND extension_id = ?")
                .bind(id)
                .bind(extension_id.as_str())
                .push(batch);
        }
        Op::ClaimTimer { id, due_at, next } => {
            // A claim must change exactly one row; `commit_stepwise` checks it.
            let claim = match next {
                Some(next) => Stmt::new("UPDATE timers SET due_at = ? WHERE id = ? AND due_at = ?")
                    .bind(int(*next))
                    .bind(id)
                    .bind(int(*due_at)),
                None => Stmt::new("DELETE FROM timers WHERE id = ? AND due_at = ?")
                    .bind(id)
                    .bind(int(*due_at)),
            };
            claim.claiming().push(batch);
        }
        Op::InsertCommand {
            session_id,
            command,
        } => {
            Stmt::new(
                "INSERT INTO commands (session_id, id, request_id, kind, payload, \
                 accepted_sequence, state, run_id, recoveries, origin) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(command.id.as_str())
            .bind(command.request_id.as_ref().map(|r| r.as_str()))
            .bind(command.kind.as_str())
            .bind(&command.payload)
            .bind(int(command.accepted_sequence))
            .bind(command.state.as_str())
            .bind(command.run_id.as_ref().map(|r| r.as_str()))
            .bind(i64::from(command.recoveries))
            .bind(command.origin.as_ref().map(|o| o.to_string()))
            .push(batch);
        }
        Op::SetCommandState {
            session_id,
            command_id,
            state,
            run_id,
        } => {
            Stmt::new(
                "UPDATE commands SET state = ?, run_id = COALESCE(?, run_id) \
                 WHERE session_id = ? AND id = ?",
            )
            .bind(state.as_str())
            .bind(run_id.as_ref().map(|r| r.as_str()))
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .push(batch);
        }
        Op::CountRecovery {
            session_id,
            command_id,
        } => {
            Stmt::new(
                "UPDATE commands SET recoveries = recoveries + 1 WHERE session_id = ? AND id = ?",
            )
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .push(batch);
        }
        Op::InsertEntry { session_id, entry } => {
            let message = serde_json::to_string(&entry.message)
                .map_err(|error| StoreError::Corrupt(format!("message: {error}")))?;
            Stmt::new(
                "INSERT INTO entries (session_id, id, parent_id, sequence, command_id, message) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(entry.id.as_str())
            .bind(entry.parent.as_ref().map(|p| p.as_str()))
            .bind(int(entry.sequence))
            .bind(entry.command_id.as_ref().map(|c| c.as_str()))
            .bind(message)
            .push(batch);
        }
        Op::InsertCompaction {
            session_id,
            compaction,
        } => {
            Stmt::new(
                "INSERT INTO compactions (session_id, id, commit_sequence, first_kept_entry, \
                 precedes_sequence, at, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(compaction.id.as_str())
            .bind(int(compaction.commit_sequence))
            .bind(compaction.first_kept.as_str())
            .bind(int(compaction.precedes_sequence))
            .bind(int(compaction.at))
            .bind(&compaction.summary)
            .push(batch);
        }
        Op::InsertSandboxFailure {
            session_id,
            failure,
        } => {
            Stmt::new(
                "INSERT INTO sandbox_failures (session_id, id, sequence, at, capability, message) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(failure.id.as_str())
            .bind(int(failure.sequence))
            .bind(int(failure.at))
            .bind(&failure.capability)
            .bind(&failure.message)
            .push(batch);
        }
        Op::InsertTerminal {
            session_id,
            terminal,
        } => {
            Stmt::new(
                "INSERT INTO terminals (session_id, command_id, outcome, sequence, diagnostic, \
                 anchor_entry) VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(terminal.command_id.as_str())
            .bind(outcome_str(terminal.outcome))
            .bind(int(terminal.sequence))
            .bind(terminal.diagnostic.as_deref())
            .bind(terminal.anchor.as_ref().map(|a| a.as_str()))
            .push(batch);
        }
    }
    Ok(())
}

fn preference_json(header: &SessionHeader) -> Result<Option<String>, StoreError> {
    header
        .model_preference
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::Corrupt(format!("model preference: {error}")))
}

pub(crate) fn outcome_str(outcome: TerminalOutcome) -> &'static str {
    match outcome {
        TerminalOutcome::Completed => "completed",
        TerminalOutcome::Cancelled => "cancelled",
        TerminalOutcome::Failed => "failed",
        TerminalOutcome::Interrupted => "interrupted",
    }
}
