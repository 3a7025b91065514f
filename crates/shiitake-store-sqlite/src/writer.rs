//! The single SQLite writer: every commit of an Agent goes through one thread.
//!
//! Owners hand their commits to this thread as statements; it takes whatever is waiting (up
//! to a bound) and commits it in one transaction (group commit), then answers
//! each caller. A group runs first as it is; if one request fails, the group is
//! undone and run again with each request under its own savepoint, so one bad
//! request is rolled back alone and cannot fail the others. One writer means
//! no "database is locked" and more than one commit per fsync.
//!
//! The writer is a plain thread on a `rusqlite` connection rather than an async
//! sqlx connection: sqlx hands every statement to a worker thread and back, and
//! those hand-offs, not SQLite, were most of the cost of an acceptance (see
//! docs/benchmarks.md). Here a commit costs one hand-off in and one answer out.
//! rusqlite and sqlx link the same SQLite (`libsqlite3-sys`, which Cargo allows
//! only once in a build because it `links = "sqlite3"`): one copy of SQLite in the
//! process matters, because two would not see each other's POSIX locks.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::types::{ToSql, ToSqlOutput, Value as SqlValue};
use rusqlite::{Connection, OpenFlags, PrepFlags, Statement, params_from_iter};
use shiitake_core::store::StoreError;
use shiitake_store_sql::queue::{self, Groups, Request};
use shiitake_store_sql::{Bind, Expect, Stmt, TextKey};

use crate::Durability;

/// One caller's commit, already made into statements on the caller's side (JSON and
/// packed messages included), so the one writer thread only executes.
type WriteRequest = Request<Vec<Stmt>>;

/// Prepared statements the writer keeps: every statement shape it writes, with room.
/// One past them is prepared for its one run (none is: the shapes are fixed).
const STATEMENT_CACHE: usize = 64;

/// Opens the writer's connection on the database the migrations just prepared.
pub(crate) fn open(path: &Path, durability: Durability) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(sqlite)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite)?;
    conn.pragma_update(None, "synchronous", durability.pragma())
        .map_err(sqlite)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(sqlite)?;
    Ok(conn)
}

/// Runs on the writer thread until every sender is dropped, then closes the connection.
/// Counts each transaction it commits in `commits`.
pub(crate) fn run(conn: Connection, mut requests: Groups<Vec<Stmt>>, commits: &AtomicU64) {
    let mut prepared = Prepared::new(&conn);
    let mut group = Vec::with_capacity(queue::MAX_GROUP);
    while requests.blocking_next(&mut group) {
        let results = commit_group(&mut prepared, &group, commits);
        queue::answer(&mut group, results);
    }
    drop(prepared);
    if let Err((_, error)) = conn.close() {
        tracing::warn!(%error, "closing the SQLite writer connection");
    }
}

/// The writer's prepared statements, found by the address of their `'static` text.
///
/// rusqlite's own cache (`prepare_cached`) hashes the whole text of a statement, copies
/// it into a new `Arc<str>` and moves the statement through an LRU list, on every
/// execution; a commit runs each of a few fixed texts, and their addresses are enough
/// to tell them apart (two copies of one text are two entries, which is harmless).
struct Prepared<'conn> {
    conn: &'conn Connection,
    statements: HashMap<TextKey, Statement<'conn>>,
}

impl<'conn> Prepared<'conn> {
    fn new(conn: &'conn Connection) -> Self {
        Self {
            conn,
            statements: HashMap::with_capacity(STATEMENT_CACHE),
        }
    }

    /// Runs `sql` with `params` and returns the rows it changed.
    fn execute<P: rusqlite::Params>(
        &mut self,
        sql: &'static str,
        params: P,
    ) -> rusqlite::Result<usize> {
        let key = TextKey::of(sql);
        if let Some(statement) = self.statements.get_mut(&key) {
            return statement.execute(params);
        }
        let mut statement = self
            .conn
            .prepare_with_flags(sql, PrepFlags::SQLITE_PREPARE_PERSISTENT)?;
        let changed = statement.execute(params);
        if self.statements.len() < STATEMENT_CACHE {
            self.statements.insert(key, statement);
        }
        changed
    }
}

/// Commits `group` in one transaction and returns each request's outcome, in order.
fn commit_group(
    conn: &mut Prepared<'_>,
    group: &[WriteRequest],
    commits: &AtomicU64,
) -> Vec<Result<(), StoreError>> {
    let failed_all = |error: &StoreError| group.iter().map(|_| Err(error.duplicate())).collect();
    if let Err(error) = execute(conn, "BEGIN IMMEDIATE") {
        return failed_all(&error);
    }
    let results = match group {
        [only] => vec![apply(conn, &only.work)],
        // Requests almost never fail, so a group first runs without savepoints: each
        // one costs SQLite two more statements and a copy of every page the request
        // touches into the sub-journal (docs/benchmarks.md).
        _ if group
            .iter()
            .all(|request| apply(conn, &request.work).is_ok()) =>
        {
            group.iter().map(|_| Ok(())).collect()
        }
        _ => {
            // One failed: undo the whole group, then run each request under its own
            // savepoint, so only the failing one is rolled back.
            rollback(conn);
            if let Err(error) = execute(conn, "BEGIN IMMEDIATE") {
                return failed_all(&error);
            }
            let mut results = Vec::with_capacity(group.len());
            for request in group {
                match isolated(conn, &request.work) {
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
        Ok(()) => {
            commits.fetch_add(1, Ordering::Relaxed);
            results
        }
        Err(error) => {
            rollback(conn);
            failed_all(&error)
        }
    }
}

/// Applies one request of a group under a savepoint, undoing only it when it fails.
/// The outer error means the savepoint could not be taken, undone or released.
fn isolated(conn: &mut Prepared<'_>, batch: &[Stmt]) -> Result<Result<(), StoreError>, StoreError> {
    execute(conn, "SAVEPOINT request")?;
    let result = apply(conn, batch);
    if result.is_err() {
        execute(conn, "ROLLBACK TO request")?;
    }
    execute(conn, "RELEASE request")?;
    Ok(result)
}

/// Executes every statement of `batch`, checking what each must find.
fn apply(conn: &mut Prepared<'_>, batch: &[Stmt]) -> Result<(), StoreError> {
    for stmt in batch {
        let changed = match conn.execute(stmt.sql, params_from_iter(stmt.binds.iter().map(Param))) {
            Ok(changed) => changed as u64,
            // A claim's insert reads the row it depends on in a subquery, which binds
            // NULL into a NOT NULL column when that row is not there: it found nothing.
            Err(error) if matches!(stmt.expect, Expect::Claim(_)) && not_null(&error) => 0,
            Err(error) => return Err(sqlite(error)),
        };
        stmt.expect.check(changed)?;
    }
    Ok(())
}

fn execute(conn: &mut Prepared<'_>, sql: &'static str) -> Result<(), StoreError> {
    conn.execute(sql, []).map_err(sqlite)?;
    Ok(())
}

/// A neutral parameter as rusqlite binds it.
struct Param<'a>(&'a Bind);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Bind::Text(Some(text)) => ToSqlOutput::from(text.as_str()),
            Bind::Int(Some(value)) => ToSqlOutput::from(*value),
            Bind::Text(None) | Bind::Int(None) => ToSqlOutput::Owned(SqlValue::Null),
            Bind::Bytes(bytes) => ToSqlOutput::from(bytes.as_slice()),
            Bind::Bool(value) => ToSqlOutput::from(*value),
        })
    }
}

fn rollback(conn: &mut Prepared<'_>) {
    if let Err(error) = execute(conn, "ROLLBACK") {
        tracing::trace!(%error, "nothing to roll back");
    }
}

/// Whether a NOT NULL constraint refused the write.
fn not_null(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL
    )
}

/// A rusqlite error as core sees it: whether it passes by waiting (a full disk, an I/O
/// error, a busy or locked file, a file that refuses writes: [`StoreError::Unavailable`],
/// and the owner waits for the store), else whether a unique index (or the primary
/// key) refused the write.
fn sqlite(error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error
        && shiitake_store_sql::sqlite_code_passes(failure.extended_code)
    {
        return StoreError::Unavailable(error.to_string());
    }
    let unique = matches!(
        &error,
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    );
    StoreError::Database {
        message: error.to_string(),
        unique,
    }
}
