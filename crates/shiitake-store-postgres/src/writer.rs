//! The group-commit writer of one process: every commit of its owners goes
//! through one connection, and whatever is waiting commits in one transaction.
//!
//! Inside a group each request runs under its own savepoint, so one bad request
//! (a reused request id, a timer another process claimed, a fenced owner) is
//! rolled back alone and answered with its error while the others commit. The
//! transaction also announces the Sessions it changed (`pg_notify`), which
//! PostgreSQL delivers when, and only if, it commits.

use std::collections::BTreeMap;
use std::sync::Mutex;

use shiitake_core::store::{Op, StoreError};
use shiitake_store_sql::{Bind, Dialect, Stmt, db, encode};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection};
use sqlx::query::Query;
use sqlx::{ConnectOptions, Connection, Executor};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::AgentKey;
use crate::events::{CHANNEL, committed_payload};

/// Most requests committed in one transaction.
const MAX_GROUP: usize = 256;

/// Queued commits before callers wait for room.
const QUEUE: usize = 4096;

/// One caller's commit.
struct WriteRequest {
    ops: Vec<Op>,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The handle owners commit through.
pub(crate) struct Writer {
    sender: Mutex<Option<mpsc::Sender<WriteRequest>>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer task on `conn`; it reconnects with `connect` if the connection breaks.
    pub(crate) fn start(
        conn: PgConnection,
        connect: PgConnectOptions,
        agent: AgentKey,
        holder: String,
    ) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(conn, connect, agent, holder, receiver));
        Self {
            sender: Mutex::new(Some(sender)),
            task: Mutex::new(Some(task)),
        }
    }

    /// Commits `ops` in the next group; all of them or none.
    pub(crate) async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or(StoreError::Closed)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(WriteRequest { ops, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Stops taking commits and waits for the ones already handed over.
    pub(crate) async fn close(&self) {
        drop(
            self.sender
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        let task = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "the PostgreSQL writer task failed");
        }
    }
}

async fn run(
    mut conn: PgConnection,
    connect: PgConnectOptions,
    agent: AgentKey,
    holder: String,
    mut requests: mpsc::Receiver<WriteRequest>,
) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = requests.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match requests.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        let (results, broken) = commit_group(&mut conn, agent.as_str(), &holder, &group).await;
        for (request, result) in group.drain(..).zip(results) {
            // A caller that stopped waiting: what committed stands.
            if request.reply.send(result).is_err() {
                tracing::trace!("a committer left before its answer");
            }
        }
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

/// A request ready to run: its statements and the Sessions it announces.
struct Prepared {
    statements: Vec<Stmt>,
    /// Session id → head sequence after this request.
    heads: BTreeMap<String, u64>,
}

fn prepare(holder: &str, ops: &[Op]) -> Result<Prepared, StoreError> {
    let heads = ops
        .iter()
        .filter_map(|op| match op {
            Op::PutHeader(header) => Some((header.id.as_str().to_owned(), header.head_sequence)),
            _ => None,
        })
        .collect();
    Ok(Prepared {
        statements: encode(Dialect::Postgres, holder, ops)?,
        heads,
    })
}

/// Commits `group` in one transaction and returns each request's outcome in order,
/// and whether the connection looks broken.
async fn commit_group(
    conn: &mut PgConnection,
    agent: &str,
    holder: &str,
    group: &[WriteRequest],
) -> (Vec<Result<(), StoreError>>, bool) {
    let prepared: Vec<Result<Prepared, StoreError>> = group
        .iter()
        .map(|request| prepare(holder, &request.ops))
        .collect();
    let failed_all = |error: &StoreError| -> Vec<Result<(), StoreError>> {
        group.iter().map(|_| Err(error.duplicate())).collect()
    };
    if let Err(error) = conn.execute("BEGIN").await {
        let error = db(error);
        return (failed_all(&error), true);
    }
    let mut results = Vec::with_capacity(group.len());
    let mut heads = BTreeMap::new();
    let single = group.len() == 1;
    for request in &prepared {
        let result = match request {
            Err(error) => Err(error.duplicate()),
            Ok(request) if single => apply(conn, agent, &request.statements).await,
            Ok(request) => match isolated(conn, agent, &request.statements).await {
                Ok(result) => result,
                Err(error) => {
                    // The savepoint machinery failed: nothing here can be trusted
                    // to be whole, so none of it commits.
                    rollback(conn).await;
                    return (failed_all(&error), true);
                }
            },
        };
        if let (Ok(()), Ok(request)) = (&result, request) {
            heads.extend(request.heads.iter().map(|(id, head)| (id.clone(), *head)));
        }
        results.push(result);
    }
    if results.iter().all(Result::is_err) {
        rollback(conn).await;
        return (results, false);
    }
    if !heads.is_empty() {
        let payloads: Vec<String> = heads
            .iter()
            .map(|(session, head)| committed_payload(agent, session, *head))
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
