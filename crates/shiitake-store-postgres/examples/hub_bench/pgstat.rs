//! What PostgreSQL itself says about a phase: the raw commit rate the Hub's figures
//! are read against, and counters read before and after a phase (transaction
//! ids, and — when the server loads `pg_stat_statements`, as
//! `cargo xtask postgres start` does — every statement a phase sent).

use std::time::{Duration, Instant};

use futures::future::join_all;
use sqlx::{Connection, PgConnection};

use crate::Failure;

/// How long each measurement of the raw commit rate runs.
pub const RAW_FOR: Duration = Duration::from_secs(3);

/// Commits/s of `connections` connections on `database`, each sending `INSERT`
/// (one small row, autocommit: `INSERT; COMMIT`) one after the other for
/// [`RAW_FOR`]: what PostgreSQL's durable commits cost on this machine and disk,
/// with its own grouping of WAL flushes across connections.
pub async fn raw_commit_rate(database: &str, connections: usize) -> Result<f64, Failure> {
    let mut setup = PgConnection::connect(database).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS hub_bench_raw (id bigserial PRIMARY KEY, body text NOT NULL)",
    )
    .execute(&mut setup)
    .await?;
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(PgConnection::connect(database).await?);
    }
    let started = Instant::now();
    let workers = conns.into_iter().map(|mut conn| async move {
        let mut commits = 0_usize;
        while started.elapsed() < RAW_FOR {
            sqlx::query("INSERT INTO hub_bench_raw (body) VALUES ($1)")
                .bind("a row the size of a small header")
                .execute(&mut conn)
                .await?;
            commits += 1;
        }
        conn.close().await?;
        Ok::<usize, Failure>(commits)
    });
    let mut total = 0;
    for commits in join_all(workers).await {
        total += commits?;
    }
    let elapsed = started.elapsed();
    sqlx::query("TRUNCATE hub_bench_raw")
        .execute(&mut setup)
        .await?;
    setup.close().await?;
    #[allow(clippy::cast_precision_loss)]
    Ok(total as f64 / elapsed.as_secs_f64())
}

/// Counters of the whole server at one moment; a phase is the difference of two.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Transaction ids handed out: one per writing transaction, one per writing
    /// savepoint inside one.
    pub xids: i64,
    /// Statements run, `BEGIN`/`COMMIT`/`SAVEPOINT` included (not round trips: the
    /// writer pipelines a group);
    /// `None` without `pg_stat_statements`.
    pub statements: Option<i64>,
    /// `COMMIT` statements (explicit transactions).
    pub commits: Option<i64>,
    /// `SAVEPOINT` statements (requests isolated inside a group).
    pub savepoints: Option<i64>,
}

impl Counters {
    pub async fn read(conn: &mut PgConnection) -> Result<Self, Failure> {
        // Not `pg_stat_database.xact_commit`: backends report it at most once a
        // second, too late for a phase of a second.
        let xids: i64 =
            sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
                .fetch_one(&mut *conn)
                .await?;
        let statements: Option<(i64, i64, i64)> = if has_statements(conn).await {
            Some(
                sqlx::query_as(
                    "SELECT coalesce(sum(calls), 0)::bigint, \
                     coalesce(sum(calls) FILTER (WHERE query = 'COMMIT'), 0)::bigint, \
                     coalesce(sum(calls) FILTER (WHERE query LIKE 'SAVEPOINT%'), 0)::bigint \
                     FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                )
                .fetch_one(&mut *conn)
                .await?,
            )
        } else {
            None
        };
        Ok(Self {
            xids,
            statements: statements.map(|s| s.0),
            commits: statements.map(|s| s.1),
            savepoints: statements.map(|s| s.2),
        })
    }

    /// What happened between `before` and `self`.
    pub fn since(self, before: Self) -> Self {
        let minus = |a: Option<i64>, b: Option<i64>| a.zip(b).map(|(a, b)| a - b);
        Self {
            xids: self.xids - before.xids,
            statements: minus(self.statements, before.statements),
            commits: minus(self.commits, before.commits),
            savepoints: minus(self.savepoints, before.savepoints),
        }
    }

    /// Two phases' counts added.
    pub fn plus(self, other: Self) -> Self {
        let add = |a: Option<i64>, b: Option<i64>| a.zip(b).map(|(a, b)| a + b);
        Self {
            xids: self.xids + other.xids,
            statements: add(self.statements, other.statements),
            commits: add(self.commits, other.commits),
            savepoints: add(self.savepoints, other.savepoints),
        }
    }

    /// Durable (writing) commits: transaction ids less those of savepoints, which
    /// commit with their transaction. Without `pg_stat_statements` savepoints cannot
    /// be told apart, and every id counts.
    pub fn durable_commits(self) -> i64 {
        self.xids - self.savepoints.unwrap_or(0)
    }
}

/// Whether `pg_stat_statements` is loaded here (created in this database if it is).
pub async fn has_statements(conn: &mut PgConnection) -> bool {
    let loaded: Result<String, _> = sqlx::query_scalar("SHOW shared_preload_libraries")
        .fetch_one(&mut *conn)
        .await;
    if !loaded.is_ok_and(|libraries| libraries.contains("pg_stat_statements")) {
        return false;
    }
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut *conn)
        .await
        .is_ok()
}

/// Forgets the statements counted so far; false without `pg_stat_statements`.
pub async fn reset_statements(conn: &mut PgConnection) -> Result<bool, Failure> {
    if !has_statements(conn).await {
        return Ok(false);
    }
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// One statement of a phase: its text, calls, rows and server time.
pub struct Statement {
    pub query: String,
    pub calls: i64,
    pub rows: i64,
    pub total_ms: f64,
}

/// The statements counted since the last reset, most called first.
pub async fn statements(conn: &mut PgConnection) -> Result<Vec<Statement>, Failure> {
    let rows: Vec<(String, i64, i64, f64)> = sqlx::query_as(
        "SELECT query, calls, rows, total_exec_time FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_current_snapshot%' \
         ORDER BY calls DESC, query",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(query, calls, rows, total_ms)| Statement {
            query,
            calls,
            rows,
            total_ms,
        })
        .collect())
}
