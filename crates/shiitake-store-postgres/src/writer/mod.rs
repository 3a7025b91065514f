//! The group-commit writer of one process: every commit of its owners, of every
//! tenant the process serves, goes through one connection, and whatever is waiting
//! commits in one transaction. Each request carries its tenant, so its statements
//! (and its fence) run for that tenant alone.
//!
//! A group is pipelined: `BEGIN`, every request's statements and the announcement
//! are sent at once, the answers checked (each statement's rows against what it must
//! find), then `COMMIT`: two round trips whatever the group's size. If one request
//! fails (a reused request id, a timer another process claimed, a fenced owner), the
//! group is rolled back and run again one statement at a time, each request under its
//! own savepoint, so the bad one is undone alone and answered with its error while
//! the others commit. The announcement (`pg_notify`) of the Sessions a group changed
//! is in its transaction, which PostgreSQL delivers when, and only if, it commits.
//!
//! When the connection breaks (`link.rs`), a group that had not sent its `COMMIT`
//! landed nothing, so it runs once more on a fresh connection; one that had is
//! answered unavailable, since it may have landed (the owners read their Session back).
//! While the database cannot be reached, groups are answered unavailable at once.

mod connection;
mod fold;
mod link;

use std::collections::BTreeMap;

use shiitake_core::store::{Op, StoreError};
use shiitake_store_sql::queue::{self, Groups, Queue, Request};
use shiitake_store_sql::{Dialect, Expect, Stmt, encode};
use tokio_postgres::Config;

pub(crate) use connection::config;
use connection::{Step, WriterConnection};
use link::Link;

use crate::AgentKey;
use crate::events::committed_payload;

/// One caller's commit: its tenant and its ops, made into statements on the writer's task.
type WriteRequest = Request<Commit>;

/// What one owner hands the writer.
pub(crate) struct Commit {
    agent: AgentKey,
    ops: Vec<Op>,
}

/// The handle owners commit through.
pub(crate) struct Writer {
    /// Commits for the writer task, which runs until the queue closes.
    queue: Queue<Commit>,
}

impl Writer {
    /// Connects the writer's own connection with `config` and starts its task, which
    /// connects again when the connection breaks.
    pub(crate) async fn start(config: Config, holder: String) -> Result<Self, StoreError> {
        let conn = WriterConnection::connect(&config)
            .await
            .map_err(connection::pg)?;
        let (queue, groups) = Queue::new();
        tokio::spawn(run(conn, config, holder, groups));
        Ok(Self { queue })
    }

    /// Commits `ops` of the tenant `agent` in the next group; all of them or none.
    pub(crate) async fn commit(&self, agent: AgentKey, ops: Vec<Op>) -> Result<(), StoreError> {
        self.queue.submit(Commit { agent, ops }).await
    }

    /// Stops taking commits and waits for the ones already handed over.
    pub(crate) async fn close(&self) {
        self.queue.close().await;
    }
}

async fn run(conn: WriterConnection, config: Config, holder: String, mut requests: Groups<Commit>) {
    let mut link = Link::new(conn, config);
    let mut group = Vec::with_capacity(queue::MAX_GROUP);
    loop {
        let more = match link.retry_at() {
            // Without a connection since an attempt failed: the next one is made when
            // due even if no request comes, so the first after the database returns
            // finds a connection.
            Some(at) => tokio::select! {
                more = requests.next(&mut group) => more,
                () = tokio::time::sleep_until(at.into()) => {
                    link.reconnect().await;
                    continue;
                }
            },
            None => requests.next(&mut group).await,
        };
        if !more {
            break;
        }
        let results = commit(&mut link, &holder, &group).await;
        queue::answer(&mut group, results);
    }
    link.close().await;
}

/// Commits `group` and returns each request's outcome in order: on the connection,
/// replaced first if it was lost; and once more on a fresh one if it broke before the
/// group's `COMMIT` was sent (nothing of it landed then).
async fn commit(
    link: &mut Link,
    holder: &str,
    group: &[WriteRequest],
) -> Vec<Result<(), StoreError>> {
    let prepared: Vec<Result<Prepared<'_>, StoreError>> = group
        .iter()
        .map(|request| prepare(holder, &request.work.agent, &request.work.ops))
        .collect();
    let mut results = Vec::new();
    for attempt in 0..2 {
        let conn = match link.ready().await {
            Ok(conn) => conn,
            Err(unavailable) if attempt == 0 => return own_errors(&prepared, Some(&unavailable)),
            // The fresh connection could not be had: the first run's answers stand.
            Err(_) => return results,
        };
        conn.start_group();
        results = commit_group(conn, &prepared).await;
        if !conn.broke_before_commit() {
            if conn.is_closed() {
                link.lose("the connection broke while the group committed");
            }
            return results;
        }
        link.lose("the connection broke before the group committed; it runs again");
    }
    results
}

/// A request ready to run: its tenant, its statements and the Sessions it announces.
struct Prepared<'a> {
    agent: &'a AgentKey,
    statements: Vec<Stmt>,
    /// Session id → head sequence after this request.
    heads: BTreeMap<String, u64>,
}

fn prepare<'a>(holder: &str, agent: &'a AgentKey, ops: &[Op]) -> Result<Prepared<'a>, StoreError> {
    let heads = ops
        .iter()
        .filter_map(|op| match op {
            Op::PutHeader(header) => Some((header.id.as_str().to_owned(), header.head_sequence)),
            _ => None,
        })
        .collect();
    Ok(Prepared {
        agent,
        statements: encode(Dialect::Postgres, holder, ops)?,
        heads,
    })
}

/// Why a pipelined group did not commit.
enum Refused {
    /// One request failed (the first one found): run the group again request by request.
    Request(usize, StoreError),
    /// The transaction itself failed (`BEGIN`, the announcement, `COMMIT`, the connection):
    /// every request fails with it.
    Group(StoreError),
}

/// Commits the `prepared` requests in one transaction and returns each request's
/// outcome in order.
async fn commit_group(
    conn: &mut WriterConnection,
    prepared: &[Result<Prepared<'_>, StoreError>],
) -> Vec<Result<(), StoreError>> {
    let runnable = prepared.iter().filter(|request| request.is_ok()).count();
    if runnable == 0 {
        return own_errors(prepared, None);
    }
    match pipelined(conn, prepared).await {
        Ok(()) => own_errors(prepared, None),
        Err(Refused::Group(error)) => own_errors(prepared, Some(&error)),
        Err(Refused::Request(at, error)) if runnable == 1 => {
            // Alone in its group: its error is its own, and nothing else is to keep.
            let mut results = own_errors(prepared, None);
            results[at] = Err(error);
            results
        }
        // The connection is gone: running the group again request by request on it
        // would only fail each request the same way.
        Err(Refused::Request(_, error)) if conn.is_closed() => own_errors(prepared, Some(&error)),
        Err(Refused::Request(..)) => isolated(conn, prepared).await,
    }
}

/// Each request's result when the group committed (`group_error` is `None`) or failed
/// as a whole: a request that could not be made into statements keeps its own error.
fn own_errors(
    prepared: &[Result<Prepared<'_>, StoreError>],
    group_error: Option<&StoreError>,
) -> Vec<Result<(), StoreError>> {
    prepared
        .iter()
        .map(|request| match (request, group_error) {
            (Err(error), _) => Err(error.duplicate()),
            (Ok(_), Some(error)) => Err(error.duplicate()),
            (Ok(_), None) => Ok(()),
        })
        .collect()
}

/// The announcement of the Sessions `requests` changed: one payload per Session, at
/// its last head.
fn payloads<'a>(requests: impl Iterator<Item = &'a Prepared<'a>>) -> Vec<String> {
    let mut heads = BTreeMap::new();
    for request in requests {
        heads.extend(
            request
                .heads
                .iter()
                .map(|(id, head)| ((request.agent.as_str(), id.as_str()), *head)),
        );
    }
    heads
        .iter()
        .map(|((agent, session), head)| committed_payload(agent, session, *head))
        .collect()
}

/// Runs the group as one pipeline and commits it, or rolls it back and says why not.
/// Requests of distinct Sessions run folded (`fold.rs`): each statement once for all.
async fn pipelined(
    conn: &mut WriterConnection,
    prepared: &[Result<Prepared<'_>, StoreError>],
) -> Result<(), Refused> {
    let payloads = payloads(prepared.iter().filter_map(|request| request.as_ref().ok()));
    let requests: Vec<fold::Request<'_>> = prepared
        .iter()
        .enumerate()
        .filter_map(|(at, request)| {
            let request = request.as_ref().ok()?;
            Some((at, request.agent.as_str(), request.statements.as_slice()))
        })
        .collect();
    let folds = fold::plan(&requests);
    let columns: Vec<Vec<fold::Column<'_>>> =
        folds.iter().flatten().map(fold::Fold::columns).collect();
    let mut calls = Vec::new();
    // What each call must find, and which request a failure of it is reported against.
    let mut checks = Vec::new();
    match &folds {
        Some(folds) => {
            for (fold, columns) in folds.iter().zip(&columns) {
                let at = fold.first_request();
                let call = conn
                    .fold_call(fold.sql, columns)
                    .await
                    .map_err(|error| Refused::Request(at, error))?;
                calls.push(call);
                checks.push(Check::Fold(fold));
            }
        }
        None => {
            for (at, request) in prepared.iter().enumerate() {
                let Ok(request) = request else { continue };
                for stmt in &request.statements {
                    let call = conn
                        .call(&request.agent.0, stmt)
                        .await
                        .map_err(|error| Refused::Request(at, error))?;
                    calls.push(call);
                    checks.push(Check::Statement(at, stmt.expect));
                }
            }
        }
    }
    if !payloads.is_empty() {
        calls.push(conn.notify(&payloads));
    }
    let (begun, results) = conn.begin_with(&calls).await;
    let refused = match begun {
        Err(error) => Some(Refused::Group(error)),
        Ok(()) => check(results, &checks),
    };
    if let Some(refused) = refused {
        conn.rollback().await;
        return Err(refused);
    }
    conn.step(Step::Commit).await.map_err(|error| {
        // A failed COMMIT has ended the transaction; nothing of it stands.
        Refused::Group(error)
    })
}

/// What one call of a pipeline must find.
enum Check<'a> {
    /// A request's own statement (the request's index in the group).
    Statement(usize, Expect),
    /// A folded statement: one row for each of its requests that had to find one.
    Fold(&'a fold::Fold<'a>),
}

impl Check<'_> {
    /// Whether `rows` are what the call had to find.
    fn verdict(&self, rows: u64) -> Result<(), StoreError> {
        match self {
            Check::Statement(_, expect) => expect.check(rows),
            Check::Fold(fold) => fold.check(rows),
        }
    }

    /// The request a failure of this call is reported against.
    fn request(&self) -> usize {
        match self {
            Check::Statement(at, _) => *at,
            Check::Fold(fold) => fold.first_request(),
        }
    }
}

/// The first failure among a pipeline's answers: the statements (what `checks` says
/// each must find), then the announcement if any.
fn check(results: Vec<Result<u64, StoreError>>, checks: &[Check<'_>]) -> Option<Refused> {
    let mut results = results.into_iter();
    for expected in checks {
        let found = results
            .next()
            .unwrap_or_else(|| Err(StoreError::database("the pipeline lost an answer")));
        if let Err(error) = found.and_then(|rows| expected.verdict(rows)) {
            // What follows a failed statement failed with it (the transaction is
            // aborted), so the first failure is the one to report.
            return Some(Refused::Request(expected.request(), error));
        }
    }
    match results.next() {
        Some(Err(error)) => Some(Refused::Group(error)),
        Some(Ok(_)) | None => None,
    }
}

/// Runs the group again, in a fresh transaction, one statement at a time and each
/// request under its own savepoint, so only a failing one is rolled back. The locks
/// of the first run were let go in between: a lease taken over meanwhile is found by
/// the fence here.
async fn isolated(
    conn: &mut WriterConnection,
    prepared: &[Result<Prepared<'_>, StoreError>],
) -> Vec<Result<(), StoreError>> {
    let outcome = isolated_transaction(conn, prepared).await;
    match outcome {
        Ok(results) => results,
        Err(error) => {
            conn.rollback().await;
            own_errors(prepared, Some(&error))
        }
    }
}

/// [`isolated`]'s transaction; an error fails every request (the caller rolls back).
async fn isolated_transaction(
    conn: &mut WriterConnection,
    prepared: &[Result<Prepared<'_>, StoreError>],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    conn.step(Step::Begin).await?;
    let mut results = Vec::with_capacity(prepared.len());
    for request in prepared {
        let result = match request {
            // Not made into statements: nothing of it reached the database.
            Err(error) => Err(error.duplicate()),
            Ok(request) => {
                conn.step(Step::Savepoint).await?;
                let result = apply(conn, request).await;
                if result.is_err() {
                    conn.step(Step::RollbackTo).await?;
                }
                conn.step(Step::Release).await?;
                result
            }
        };
        results.push(result);
    }
    let committed = prepared
        .iter()
        .zip(&results)
        .filter_map(|(request, result)| request.as_ref().ok().filter(|_| result.is_ok()));
    let payloads = payloads(committed);
    if results.iter().all(Result::is_err) {
        conn.rollback().await;
        return Ok(results);
    }
    if !payloads.is_empty() {
        let call = conn.notify(&payloads);
        conn.one(&call).await?;
    }
    conn.step(Step::Commit).await?;
    Ok(results)
}

/// Executes the statements of one request one at a time, checking what each must
/// find (claims, fences) before the next is sent.
async fn apply(conn: &mut WriterConnection, request: &Prepared<'_>) -> Result<(), StoreError> {
    for stmt in &request.statements {
        let call = conn.call(&request.agent.0, stmt).await?;
        let rows = conn.one(&call).await?;
        stmt.expect.check(rows)?;
    }
    Ok(())
}
