//! The profile phase: what one process sends PostgreSQL for a 10-step run.
//!
//! One process (the throughput phase's cluster of one: its 48 held Sessions idle),
//! `rounds` rounds of `RUNS` runs at once. Around each round's runs (the Sessions are
//! created before) the server's counters are read, and, with `pg_stat_statements`
//! (loaded by `cargo xtask postgres start`), every statement's calls, rows and
//! server time. Printed per run. A statement on the pool is one round trip (sqlx
//! sends a prepared statement's bind and execute in one); the writer pipelines a
//! group (`BEGIN`, its statements and its `pg_notify` in one round trip, `COMMIT` in
//! a second), so its round trips are two per `COMMIT`.

use std::collections::BTreeMap;
use std::path::Path;

use sqlx::Connection;

use crate::Failure;
use crate::pgstat::{self, Counters};
use crate::throughput::{Cluster, RUNS, STEPS};

/// Per query text: (calls, rows, server milliseconds).
type Calls = BTreeMap<String, (i64, i64, f64)>;

async fn calls(conn: &mut sqlx::PgConnection) -> Result<Calls, Failure> {
    Ok(pgstat::statements(conn)
        .await?
        .into_iter()
        .map(|s| (s.query, (s.calls, s.rows, s.total_ms)))
        .collect())
}

/// Runs the profile and prints its table.
pub async fn run(binary: &Path, database: &str, rounds: usize) -> Result<(), Failure> {
    let logs = tempfile::tempdir()?;
    let mut cluster = Cluster::start(binary, database, logs.path(), 1).await?;
    let mut conn = sqlx::PgConnection::connect(database).await?;
    let counted = pgstat::reset_statements(&mut conn).await?;
    let mut total: Option<Counters> = None;
    let mut statements = Calls::new();
    for round in 0..rounds {
        let sessions = cluster.fresh_sessions().await?;
        let before_calls = if counted {
            calls(&mut conn).await?
        } else {
            Calls::new()
        };
        let before = Counters::read(&mut conn).await?;
        cluster.run_sessions(sessions).await?;
        let phase = Counters::read(&mut conn).await?.since(before);
        total = Some(total.map_or(phase, |sum| sum.plus(phase)));
        if counted {
            for (query, (calls, rows, ms)) in calls(&mut conn).await? {
                let (c0, r0, m0) = before_calls.get(&query).copied().unwrap_or_default();
                let entry = statements.entry(query).or_default();
                entry.0 += calls - c0;
                entry.1 += rows - r0;
                entry.2 += ms - m0;
            }
        }
        eprintln!("hub_bench profile: round {} of {rounds} done", round + 1);
    }
    let total = total.unwrap_or_default();
    #[allow(clippy::cast_precision_loss)]
    let runs = (rounds * RUNS).max(1) as f64;
    #[allow(clippy::cast_precision_loss)]
    let per_run = |count: i64| count as f64 / runs;
    println!(
        "Hub profile, 1 process, {rounds} rounds of {RUNS} runs of {STEPS} steps; load {}",
        crate::load_average()
    );
    println!(
        "per run: {:.1} durable commits, {} statements, {} COMMITs, {} savepoints",
        per_run(total.durable_commits()),
        total
            .statements
            .map_or_else(|| "-".to_owned(), |n| format!("{:.1}", per_run(n))),
        total
            .commits
            .map_or_else(|| "-".to_owned(), |n| format!("{:.1}", per_run(n))),
        total
            .savepoints
            .map_or_else(|| "-".to_owned(), |n| format!("{:.1}", per_run(n))),
    );
    if !counted {
        println!("(no pg_stat_statements on this server: no statement table)");
        return Ok(());
    }
    let mut rows: Vec<_> = statements.into_iter().filter(|(_, s)| s.0 > 0).collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(&b.0)));
    println!("| calls per run | rows per call | ms per call | statement |");
    println!("| --- | --- | --- | --- |");
    for (query, (calls, rows, ms)) in rows {
        #[allow(clippy::cast_precision_loss)]
        let per_call = |n: f64| n / calls.max(1) as f64;
        #[allow(clippy::cast_precision_loss)]
        let rows = per_call(rows as f64);
        let text: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let text: String = text.chars().take(160).collect();
        println!(
            "| {:.2} | {rows:.2} | {:.3} | `{text}` |",
            per_run(calls),
            per_call(ms)
        );
    }
    Ok(())
}
