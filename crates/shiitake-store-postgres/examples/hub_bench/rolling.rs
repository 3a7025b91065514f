//! The rolling-restart phase: what a deploy costs the Sessions.
//!
//! Three processes (leases of 10 s) serve `DRIVEN` Sessions, each driven one prompt
//! after another through all three. `rounds` times, each process in turn is sent
//! SIGTERM, waited for (it drains: takes no more Sessions, hands its leases over,
//! exits) and started again. Meanwhile the database is watched every 10 ms: a
//! Session *stalls* while it has open work and no commit lands, and its longest
//! stall is the longest such gap. The same is measured over as long a quiet spell
//! before the restarts, for comparison. Every watched Session has a subscriber on
//! each process; each subscriber is checked against the database just before its
//! process is restarted (and the last ones at the end): it must have seen every
//! message and terminal from its first on, once, without a reset.
//!
//! Reported: drain time (SIGTERM to exit), the longest stall quiet and during the
//! restarts, the longest acceptance of a prompt (retries on other processes
//! included), and the checks: nothing lost or run twice, no recovery counted (a
//! handover is not a crash), no frame missed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::cluster::{
    NodeSpec, Watchers, assert_nothing_lost_or_doubled, assert_saw_everything, committed,
    create_sessions, drive_all, spawn_node_at, start_three, watch_all,
};
use crate::{Failure, load_average, quantile, secs};

/// Sessions driven one prompt after another.
const DRIVEN: usize = 24;
/// Of those, the ones every process has a subscriber on.
const WATCHED: usize = 4;
/// `hub.mark` calls per run.
const STEPS: usize = 6;
/// The production default.
const LEASE_MS: u64 = 10_000;
/// Time between two restarts.
const BETWEEN: Duration = Duration::from_millis(1000);

/// The longest stall of any Session seen by a watcher of the database, from when it
/// is reset to when it is read.
#[derive(Default)]
struct Stalls {
    longest: Duration,
}

/// Watches the Sessions' heads every 10 ms until `stop`, keeping the longest time
/// a Session with open work went without a commit in `stalls`.
async fn watch_heads(
    database: String,
    key: String,
    stalls: Arc<Mutex<Stalls>>,
    stop: Arc<AtomicBool>,
) -> Result<(), Failure> {
    let mut conn = sqlx::PgConnection::connect(&database).await?;
    let mut last: HashMap<String, (i64, Instant)> = HashMap::new();
    while !stop.load(Ordering::SeqCst) {
        let rows: Vec<(String, i64, bool)> = sqlx::query_as(
            "SELECT id, head_sequence, open_from IS NOT NULL FROM sessions WHERE agent_id = $1",
        )
        .bind(&key)
        .fetch_all(&mut conn)
        .await?;
        let now = Instant::now();
        for (id, head, open) in rows {
            let entry = last.entry(id).or_insert((head, now));
            if entry.0 != head || !open {
                *entry = (head, now);
            } else {
                let mut stalls = stalls.lock().map_err(|_| "stalls poisoned")?;
                stalls.longest = stalls.longest.max(now - entry.1);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Checks each subscriber against the database up to what it saw last; the frames
/// it checked.
async fn check(database: &str, key: &str, watchers: Watchers) -> Result<usize, Failure> {
    let mut frames = 0;
    for (session, seen, task) in watchers {
        // What it saw up to now, then the database, which holds at least that much.
        let through = seen
            .lock()
            .map_err(|_| "seen poisoned")?
            .messages
            .last()
            .map(|(sequence, _)| *sequence);
        let committed = committed(database, key, &session).await;
        let seen = seen.lock().map_err(|_| "seen poisoned")?;
        if seen.cut {
            return Err(
                format!("the subscription to {session} failed on a surviving process").into(),
            );
        }
        assert_saw_everything(&session, &seen, &committed, through);
        frames += seen.messages.len() + seen.terminals.len();
        task.abort();
    }
    Ok(frames)
}

/// Runs the phase and prints its table.
pub async fn run(binary: &Path, database: &str, rounds: usize) -> Result<(), Failure> {
    let key = format!(
        "rolling-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let dir = tempfile::tempdir()?;
    let spec = NodeSpec::new(LEASE_MS, STEPS);
    let (mut nodes, cluster) = start_three(binary, database, &key, dir.path(), spec);
    let sessions = create_sessions(&cluster, DRIVEN).await;
    let watched = &sessions[..WATCHED];
    let mut watchers: Vec<Watchers> = (0..3).map(|p| watch_all(&cluster, p, watched)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let drivers = drive_all(&cluster, &sessions, &stop);
    let stalls = Arc::new(Mutex::new(Stalls::default()));
    let heads_stop = Arc::new(AtomicBool::new(false));
    let heads = tokio::spawn(watch_heads(
        database.to_owned(),
        key.clone(),
        stalls.clone(),
        heads_stop.clone(),
    ));
    let load = load_average();

    // A quiet spell as long as the restarts will take, for comparison.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stalls.lock().map_err(|_| "stalls poisoned")?.longest = Duration::ZERO;
    let restarts = rounds * 3;
    tokio::time::sleep(Duration::from_secs(2) * u32::try_from(restarts).unwrap_or(u32::MAX)).await;
    let quiet = std::mem::take(&mut *stalls.lock().map_err(|_| "stalls poisoned")?).longest;

    let (mut drains, mut frames) = (Vec::new(), 0);
    let started = Instant::now();
    for restart in 0..restarts {
        let process = restart % 3;
        tokio::time::sleep(BETWEEN).await;
        frames += check(database, &key, std::mem::take(&mut watchers[process])).await?;
        cluster.set(process, None);
        let (status, took) = nodes[process].drain();
        if !status.success() {
            return Err(format!("a drained process exited with {status}").into());
        }
        drains.push(took);
        nodes[process] = spawn_node_at(
            binary,
            database,
            &key,
            dir.path(),
            &format!("node{process}-{restart}"),
            spec,
        );
        cluster.set(process, Some(&nodes[process].url));
        watchers[process] = watch_all(&cluster, process, watched);
        eprintln!(
            "hub_bench: restart {} of {restarts}: drained in {took:?}",
            restart + 1
        );
    }
    tokio::time::sleep(BETWEEN).await;
    let during = stalls.lock().map_err(|_| "stalls poisoned")?.longest;
    let restarting = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let mut accepted = Vec::new();
    let mut acceptance = Vec::new();
    for driver in drivers {
        for (command, took) in driver.await? {
            accepted.push(command);
            acceptance.push(took);
        }
    }
    heads_stop.store(true, Ordering::SeqCst);
    heads.await??;
    for watched in &mut watchers {
        frames += check(database, &key, std::mem::take(watched)).await?;
    }
    for node in &mut nodes {
        node.kill();
    }
    let recoveries = assert_nothing_lost_or_doubled(database, &key, dir.path(), &accepted).await;
    let counted = recoveries.values().filter(|count| **count > 0).count();
    println!(
        "Hub rolling restart, {rounds} rounds of SIGTERM, wait, start for each of 3 processes under load ({DRIVEN} Sessions driven; lease {} s; load average {load} at the start)",
        LEASE_MS / 1000
    );
    println!(
        "| measure | quiet | during {restarts} restarts ({:.0} s) |",
        restarting.as_secs_f64()
    );
    println!("| --- | --- | --- |");
    println!(
        "| longest stall of a Session with work | {} | {} |",
        secs(Some(quiet)),
        secs(Some(during))
    );
    println!(
        "| drain (SIGTERM to exit), p50 / max | - | {} / {} |",
        secs(quantile(&drains, 0.5)),
        secs(drains.iter().max().copied())
    );
    println!(
        "| prompt accepted (retries included), p50 / max | - | {} / {} |",
        secs(quantile(&acceptance, 0.5)),
        secs(acceptance.iter().max().copied())
    );
    println!(
        "{} prompts acknowledged: 0 lost, 0 run again; {counted} recoveries counted; subscribers on surviving processes missed 0 of {frames} frames",
        accepted.len()
    );
    Ok(())
}
