//! The group-commit writer of one process: every commit of its owners, of every
//! tenant the process serves, goes through one connection, and whatever is waiting
//! commits in one transaction. Each request carries its tenant, so its statements
//! (and its fence) run for that tenant alone.
//!
//! A group runs first as it is; if one request fails (a reused request id, a timer
//! another process claimed, a fenced owner), the group is undone and run again with
//! each request under its own savepoint, so the bad one is rolled back alone and
//! answered with its error while the others commit. The
//! transaction also announces the Sessions it changed (`pg_notify`), which
//! PostgreSQL delivers when, and only if, it commits.

use std::collections::BTreeMap;

use shiitake_core::store::{Op, StoreError};
use shiitake_store_sql::queue::{self, Groups, Queue, Request};
use shiitake_store_sql::{Bind, Dialect, Stmt, db, encode};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection};
use sqlx::query::Query;
use sqlx::{ConnectOptions, Connection, Executor};

use crate::AgentKey;
use crate::events::{CHANNEL, committed_payload};

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
    /// Starts the writer task on `conn`; it reconnects with `connect` if the connection breaks.
    pub(crate) fn start(conn: PgConnection, connect: PgConnectOptions, holder: String) -> Self {
        let (queue, groups) = Queue::new();
        tokio::spawn(run(conn, connect, holder, groups));
        Self { queue }
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

async fn run(
    mut conn: PgConnection,
    connect: PgConnectOptions,
    holder: String,
    mut requests: Groups<Commit>,
) {
    let mut group = Vec::with_capacity(queue::MAX_GROUP);
    while requests.next(&mut group).await {
        let (results, broken) = commit_group(&mut conn, &holder, &group).await;
        queue::answer(&mut group, results);
        if broken {
            match connect.connect().await {
                Ok(fresh) => conn = fresh,
                Err(error) => {
                    tracing::warn!(%error, "the PostgreSQL writer could not reconnect; the next group tries again");
                }
            }
        }
    }
    if let Err(error) = conn.close().await {
        tracing::trace!(%error, "closing the PostgreSQL writer connection");
    }
}

/// A request ready to run: its tenant, its statements and the Sessions it announces.
struct Prepared<'a> {
    agent: &'a str,
    statements: Vec<Stmt>,
    /// Session id → head sequence after this request.
    heads: BTreeMap<String, u64>,
}

fn prepare<'a>(holder: &str, agent: &'a str, ops: &[Op]) -> Result<Prepared<'a>, StoreError> {
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

/// Commits `group` in one transaction and returns each request's outcome in order,
/// and whether the connection looks broken.
async fn commit_group(
    conn: &mut PgConnection,
    holder: &str,
    group: &[WriteRequest],
) -> (Vec<Result<(), StoreError>>, bool) {
    let prepared: Vec<Result<Prepared<'_>, StoreError>> = group
        .iter()
        .map(|request| prepare(holder, request.work.agent.as_str(), &request.work.ops))
        .collect();
    let failed_all = |error: &StoreError| -> Vec<Result<(), StoreError>> {
        group.iter().map(|_| Err(error.duplicate())).collect()
    };
    if let Err(error) = conn.execute("BEGIN").await {
        let error = db(error);
        return (failed_all(&error), true);
    }
    let results = match run_requests(conn, &prepared).await {
        Ok(results) => results,
        Err((error, broken)) => return (failed_all(&error), broken),
    };
    let mut heads = BTreeMap::new();
    for (result, request) in results.iter().zip(&prepared) {
        if let (Ok(()), Ok(request)) = (result, request) {
            heads.extend(
                request
                    .heads
                    .iter()
                    .map(|(id, head)| ((request.agent, id.as_str()), *head)),
            );
        }
    }
    if results.iter().all(Result::is_err) {
        rollback(conn).await;
        return (results, false);
    }
    if !heads.is_empty() {
        let payloads: Vec<String> = heads
            .iter()
            .map(|((agent, session), head)| committed_payload(agent, session, *head))
            .collect();
        let notified =
            sqlx::query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload")
                .bind(CHANNEL)
                .bind(payloads)
                .execute(&mut *conn)
                .await;
        if let Err(error) = notified {
            let error = db(error);
            rollback(conn).await;
            return (failed_all(&error), false);
        }
    }
    match conn.execute("COMMIT").await {
        Ok(_) => (results, false),
        Err(error) => {
            let error = db(error);
            rollback(conn).await;
            (failed_all(&error), true)
        }
    }
}

/// Runs the requests of a group inside its open transaction and returns each one's
/// outcome; the error (and whether the connection looks broken) fails the whole group,
/// whose transaction is then already rolled back.
///
/// Requests almost never fail, so a group first runs as it is: a savepoint costs two
/// more round trips per request, as many as the request's own statements
/// (docs/benchmarks.md, the Hub's profile). If one fails, the whole group is undone
/// and run again in a fresh transaction with each request under its own savepoint,
/// so only the failing one is rolled back. Its locks are let go in between: a lease
/// taken over meanwhile is found by the fence of the second run.
async fn run_requests(
    conn: &mut PgConnection,
    prepared: &[Result<Prepared<'_>, StoreError>],
) -> Result<Vec<Result<(), StoreError>>, (StoreError, bool)> {
    let mut results = Vec::with_capacity(prepared.len());
    let mut failed = false;
    for request in prepared {
        match request {
            // Not made into statements: nothing of it reached the database.
            Err(error) => results.push(Err(error.duplicate())),
            Ok(request) => {
                let result = apply(conn, request.agent, &request.statements).await;
                failed = result.is_err();
                results.push(result);
                if failed {
                    break;
                }
            }
        }
    }
    if !failed {
        return Ok(results);
    }
    if let [_] = prepared {
        // Alone in its group: its error is its own, and nothing else is to keep.
        return Ok(results);
    }
    rollback(conn).await;
    conn.execute("BEGIN")
        .await
        .map_err(|error| (db(error), true))?;
    let mut results = Vec::with_capacity(prepared.len());
    for request in prepared {
        let result = match request {
            Err(error) => Err(error.duplicate()),
            Ok(request) => match isolated(conn, request.agent, &request.statements).await {
                Ok(result) => result,
                Err(error) => {
                    // The savepoint machinery failed: nothing here can be trusted
                    // to be whole, so none of it commits.
                    rollback(conn).await;
                    return Err((error, true));
                }
            },
        };
        results.push(result);
    }
    Ok(results)
}

/// Runs one request of a group under a savepoint, undoing only it when it fails.
/// The outer error means the savepoint itself failed.
async fn isolated(
    conn: &mut PgConnection,
    agent: &str,
    statements: &[Stmt],
) -> Result<Result<(), StoreError>, StoreError> {
    conn.execute("SAVEPOINT request").await.map_err(db)?;
    let result = apply(conn, agent, statements).await;
    if result.is_err() {
        conn.execute("ROLLBACK TO SAVEPOINT request")
            .await
            .map_err(db)?;
    }
    conn.execute("RELEASE SAVEPOINT request")
        .await
        .map_err(db)?;
    Ok(result)
}

/// Executes the statements of one request for the Agent `agent`, checking what each
/// must find (claims, fences).
async fn apply(
    conn: &mut PgConnection,
    agent: &str,
    statements: &[Stmt],
) -> Result<(), StoreError> {
    for stmt in statements {
        let done = query(agent, stmt).execute(&mut *conn).await.map_err(db)?;
        stmt.expect.check(done.rows_affected())?;
    }
    Ok(())
}

/// The sqlx query of a statement: the Agent first, then its parameters, a NULL typed
/// as its column.
fn query<'q>(agent: &'q str, stmt: &'q Stmt) -> Query<'q, sqlx::Postgres, PgArguments> {
    let mut query = sqlx::query(stmt.sql).bind(agent);
    for bind in &stmt.binds {
        query = match bind {
            Bind::Text(value) => query.bind(value.as_deref()),
            Bind::Int(value) => query.bind(*value),
            Bind::Bytes(value) => query.bind(value.as_slice()),
            Bind::Bool(value) => query.bind(*value),
        };
    }
    query
}

async fn rollback(conn: &mut PgConnection) {
    if let Err(error) = conn.execute("ROLLBACK").await {
        tracing::trace!(%error, "nothing to roll back");
    }
}
