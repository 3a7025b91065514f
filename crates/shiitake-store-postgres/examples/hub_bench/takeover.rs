//! The takeover phase: how long the Sessions of a process that dies wait.
//!
//! Three processes (leases of 10 s, the default heartbeat of 500 ms) serve
//! `DRIVEN` Sessions, each driven one prompt after another through all three (each
//! run calls the unsafe `hub.mark` `STEPS` times), and `IDLE` Sessions that ran one
//! prompt and were left idle, held by the process that ran it. Then, `kills` times,
//! one process (in turn) is SIGKILLed: the Sessions whose lease it holds are read
//! just before, and just after it which of them it left with open work (one it
//! settled in between has nothing for a new owner to do: it counts as idle). A
//! prompt is sent to each idle one through a surviving process, and the database is
//! watched (every 10 ms) until each of those Sessions has a commit by its new owner
//! (its head sequence moves: the resumed run's next message, or the prompt's
//! acceptance). The process is started again before the next kill. A Session with
//! no such commit within `GIVE_UP` is printed with what the database says of it,
//! and the node logs are kept.
//!
//! Reported: p50, p90 and max of those times, for Sessions with open work, idle-held
//! ones, and all; where the time goes (to the lease seen off the dead process, to a
//! live process seen holding it); and, checked on the database at the end, that no
//! acknowledged prompt was lost, none ran again after it settled, and no `hub.mark`
//! execution ran twice.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use shiitake_protocol::{CommandId, SessionId};
use sqlx::Connection;

use crate::cluster::{
    Cluster, Node, NodeSpec, assert_nothing_lost_or_doubled, create_sessions, drive_all, marks,
    prompt_timed, spawn_node_at, start_three,
};
use crate::{Failure, load_average, quantile, secs};

/// Sessions driven one prompt after another.
const DRIVEN: usize = 24;
/// Sessions held idle after one prompt.
const IDLE: usize = 12;
/// `hub.mark` calls per run.
const STEPS: usize = 6;
/// The production default.
const LEASE_MS: u64 = 10_000;
/// How long a Session may wait before it counts as stalled.
const GIVE_UP: Duration = Duration::from_secs(30);

/// The Sessions whose lease a process holds now.
async fn held_by(database: &str, key: &str, holder: &str) -> Result<Vec<String>, Failure> {
    let mut conn = sqlx::PgConnection::connect(database).await?;
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT session_id FROM session_leases WHERE agent_id = $1 AND holder = $2",
    )
    .bind(key)
    .bind(holder)
    .fetch_all(&mut conn)
    .await?;
    Ok(rows)
}

/// One Session as the watch of a takeover reads it.
#[derive(Debug)]
struct Head {
    /// Its head sequence: it moves with every commit.
    sequence: i64,
    /// Who holds its lease.
    holder: Option<String>,
    /// Whether it has open work.
    open: bool,
}

/// Each Session's [`Head`].
async fn heads(
    conn: &mut sqlx::PgConnection,
    key: &str,
    sessions: &[String],
) -> Result<HashMap<String, Head>, Failure> {
    let rows: Vec<(String, i64, Option<String>, bool)> = sqlx::query_as(
        "SELECT s.id, s.head_sequence, l.holder, s.open_from IS NOT NULL \
         FROM sessions s LEFT JOIN session_leases l \
           ON l.agent_id = s.agent_id AND l.session_id = s.id \
         WHERE s.agent_id = $1 AND s.id = ANY($2)",
    )
    .bind(key)
    .bind(sessions)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, sequence, holder, open)| {
            (
                id,
                Head {
                    sequence,
                    holder,
                    open,
                },
            )
        })
        .collect())
}

/// The times of one kill, each a list over the Sessions the dead process held.
#[derive(Default)]
struct Kill {
    /// From the kill to the first commit by the new owner, for Sessions with open work.
    open_work: Vec<Duration>,
    /// The same for idle-held Sessions sent a prompt at the kill.
    idle: Vec<Duration>,
    /// From the kill to the moment its lease was seen off the dead process (freed by a
    /// heartbeat, or claimed from the dead holder): where the takeover's time goes.
    freed: Vec<Duration>,
    /// From the kill to the moment a live process was seen holding its lease.
    claimed: Vec<Duration>,
    /// Sessions with no commit by a new owner within [`GIVE_UP`].
    stalled: usize,
}

/// Kills `nodes[victim]` and measures, per Session it held, the time to the first
/// commit by the new owner (and to its lease's freeing and claim on the way); idle
/// ones get a prompt through the survivors. Returns the times and the probes' commands.
async fn one_kill(
    cluster: &Arc<Cluster>,
    nodes: &mut [Node],
    victim: usize,
    database: &str,
    key: &str,
    round: usize,
) -> Result<(Kill, Vec<tokio::task::JoinHandle<CommandId>>), Failure> {
    let dead = nodes[victim].holder.clone();
    let ids = held_by(database, key, &dead).await?;
    cluster.set(victim, None);
    let killed = Instant::now();
    nodes[victim].kill();
    let mut conn = sqlx::PgConnection::connect(database).await?;
    // Read once the process is gone: whatever moves from here is the new owner's, and
    // what is open now is what it left unfinished (work it settled between the read of
    // its leases and the kill is not; such a Session is idle and gets a prompt).
    let before = heads(&mut conn, key, &ids).await?;
    let idle: Vec<SessionId> = before
        .iter()
        .filter(|(_, head)| !head.open)
        .filter_map(|(id, _)| SessionId::new(id.clone()).ok())
        .collect();
    let probes: Vec<_> = idle
        .into_iter()
        .enumerate()
        .map(|(n, session)| {
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let request = format!("probe-{round}-{n}");
                prompt_timed(&cluster, victim + 1, &session, &request, "probe")
                    .await
                    .0
            })
        })
        .collect();
    let mut waiting: HashMap<String, bool> = before
        .iter()
        .map(|(id, head)| (id.clone(), head.open))
        .collect();
    let (mut unfreed, mut unclaimed) = (waiting.clone(), waiting.clone());
    let mut kill = Kill::default();
    while !waiting.is_empty() && killed.elapsed() < GIVE_UP {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let now = heads(&mut conn, key, &ids).await?;
        let at = killed.elapsed();
        let holder = |id: &String| now.get(id).and_then(|head| head.holder.as_deref());
        unfreed.retain(|id, _| {
            let freed = holder(id) != Some(dead.as_str());
            if freed {
                kill.freed.push(at);
            }
            !freed
        });
        unclaimed.retain(|id, _| {
            let claimed = holder(id).is_some_and(|holder| holder != dead);
            if claimed {
                kill.claimed.push(at);
            }
            !claimed
        });
        waiting.retain(|id, open| {
            let moved =
                now.get(id).map(|head| head.sequence) != before.get(id).map(|head| head.sequence);
            if moved {
                if *open {
                    &mut kill.open_work
                } else {
                    &mut kill.idle
                }
                .push(at);
            }
            !moved
        });
    }
    kill.stalled = waiting.len();
    for (session, open) in &waiting {
        describe_stall(&mut conn, key, session, *open, before.get(session)).await?;
    }
    Ok((kill, probes))
}

/// Prints what the database says of a Session that no new owner committed to, so a
/// stall explains itself: who holds it, its open work, its last commands and the
/// requests forwarded to it that nobody answered.
async fn describe_stall(
    conn: &mut sqlx::PgConnection,
    key: &str,
    session: &str,
    open: bool,
    before: Option<&Head>,
) -> Result<(), Failure> {
    let (head, open_from, holder, lapses_ms): (i64, Option<String>, Option<String>, Option<f64>) =
        sqlx::query_as(
            "SELECT s.head_sequence, s.open_from, l.holder, \
               EXTRACT(EPOCH FROM (l.expires_at - clock_timestamp()))::float8 * 1000 \
             FROM sessions s LEFT JOIN session_leases l \
               ON l.agent_id = s.agent_id AND l.session_id = s.id \
             WHERE s.agent_id = $1 AND s.id = $2",
        )
        .bind(key)
        .bind(session)
        .fetch_one(&mut *conn)
        .await?;
    let commands: Vec<(String, Option<String>, String, i64)> = sqlx::query_as(
        "SELECT id, request_id, state, accepted_sequence FROM commands \
         WHERE agent_id = $1 AND session_id = $2 ORDER BY accepted_sequence DESC LIMIT 3",
    )
    .bind(key)
    .bind(session)
    .fetch_all(&mut *conn)
    .await?;
    let forwarded: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, left(request, 120) FROM forwarded_requests \
         WHERE agent_id = $1 AND session_id = $2 AND answer IS NULL ORDER BY id",
    )
    .bind(key)
    .bind(session)
    .fetch_all(&mut *conn)
    .await?;
    eprintln!(
        "hub_bench: stalled {session} (open work at the kill: {open}): head {head} (at the kill {:?}), open_from {open_from:?}, held by {holder:?} (lapses in {lapses_ms:?} ms); last commands {commands:?}; unanswered forwarded requests {forwarded:?}",
        before.map(|head| head.sequence)
    );
    Ok(())
}

/// Runs the phase and prints its table.
pub async fn run(binary: &Path, database: &str, kills: usize) -> Result<(), Failure> {
    let key = format!(
        "takeover-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let dir = tempfile::tempdir()?;
    let spec = NodeSpec::new(LEASE_MS, STEPS);
    let (mut nodes, cluster) = start_three(binary, database, &key, dir.path(), spec);
    let sessions = create_sessions(&cluster, DRIVEN + IDLE).await;
    let mut accepted = Vec::new();
    for (index, session) in sessions[DRIVEN..].iter().enumerate() {
        let request = format!("idle-{index}");
        accepted.push(
            prompt_timed(&cluster, index, session, &request, "once")
                .await
                .0,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let drivers = drive_all(&cluster, &sessions[..DRIVEN], &stop);
    let load = load_average();
    let (mut all_kills, mut probes) = (Kill::default(), Vec::new());
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let victim = round % 3;
        let (kill, sent) = one_kill(&cluster, &mut nodes, victim, database, &key, round).await?;
        eprintln!(
            "hub_bench: kill {} of {kills}: {} Sessions with work, {} idle, {} stalled; freed by {}, claimed by {}, slowest {}; load average {}",
            round + 1,
            kill.open_work.len(),
            kill.idle.len(),
            kill.stalled,
            secs(kill.freed.iter().max().copied()),
            secs(kill.claimed.iter().max().copied()),
            secs(kill.open_work.iter().chain(&kill.idle).max().copied()),
            load_average()
        );
        all_kills.open_work.extend(kill.open_work);
        all_kills.idle.extend(kill.idle);
        all_kills.freed.extend(kill.freed);
        all_kills.claimed.extend(kill.claimed);
        all_kills.stalled += kill.stalled;
        probes.extend(sent);
        nodes[victim] = spawn_node_at(
            binary,
            database,
            &key,
            dir.path(),
            &format!("node{victim}-{round}"),
            spec,
        );
        cluster.set(victim, Some(&nodes[victim].url));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for driver in drivers {
        accepted.extend(driver.await?.into_iter().map(|(command, _)| command));
    }
    for probe in probes {
        accepted.push(probe.await?);
    }
    for node in &mut nodes {
        node.kill();
    }
    assert_nothing_lost_or_doubled(database, &key, dir.path(), &accepted).await;
    let Kill {
        open_work,
        idle,
        freed,
        claimed,
        stalled,
    } = all_kills;
    let all: Vec<Duration> = open_work.iter().chain(&idle).copied().collect();
    println!(
        "Hub takeover, {kills} kills of 1 of 3 processes under load ({DRIVEN} Sessions driven, {IDLE} idle-held; lease {} s, heartbeat 500 ms; load average {load} at the start, {} at the end)",
        LEASE_MS / 1000,
        load_average()
    );
    println!("| Sessions of the killed process | taken over | p50 | p90 | max |");
    println!("| --- | --- | --- | --- | --- |");
    for (what, samples) in [
        ("with open work", &open_work),
        ("idle-held, a prompt sent at the kill", &idle),
        ("all: the first commit by the new owner", &all),
        ("all: the lease off the dead process", &freed),
        ("all: the lease held by a live process", &claimed),
    ] {
        println!(
            "| {what} | {} | {} | {} | {} |",
            samples.len(),
            secs(quantile(samples, 0.5)),
            secs(quantile(samples, 0.9)),
            secs(samples.iter().max().copied())
        );
    }
    println!(
        "{} prompts acknowledged: 0 lost, 0 run again after settling, 0 of {} hub.mark executions twice; {stalled} Sessions not taken over within {} s",
        accepted.len(),
        marks(dir.path()),
        GIVE_UP.as_secs()
    );
    if stalled > 0 {
        // The node logs are what explains a stall: kept, not deleted with the phase.
        eprintln!(
            "hub_bench: {stalled} Sessions stalled; the node logs are kept in {}",
            dir.keep().display()
        );
    }
    Ok(())
}
