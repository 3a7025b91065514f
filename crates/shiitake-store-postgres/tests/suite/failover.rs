//! Three Hub processes on one database, one SIGKILLed and one paused mid-run.
//!
//! Clients drive 30 Sessions through all three processes (`examples/hub_node.rs`:
//! every run calls the unsafe tool `hub.mark` several times). Mid-run, process 0
//! is killed with SIGKILL and process 1 is paused (SIGSTOP) past its lease and
//! then continued. A subscriber on process 2 watches some of the Sessions. Then:
//!
//! - no accepted command is lost: every acknowledged prompt completes;
//! - no settled work runs again: no entry of a command follows its terminal;
//! - no double run: every `hub.mark` execution id ran once, and the paused
//!   process's stale owners were refused by the fencing token (its log says so);
//! - the killed process's Sessions are freed at once (its connection went with it),
//!   well within the lease period: no lease of the killed process is left after the
//!   lease period (a stopped process keeps its Sessions only until the expiry);
//! - no timer occurrence fired twice, and timers kept firing after the kill;
//! - the subscriber on process 2 saw every committed message and terminal once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::cluster::{
    NodeSpec, assert_nothing_lost_or_doubled, assert_saw_everything, committed, create_sessions,
    drive, marks, node_binary, now_ms, query_rows, scratch, start_three, watch_all,
};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use shiitake_protocol::{AgentApi, ExtensionId};
use sqlx::{Connection, Row};
use support::fresh_key;

/// The lease is long next to a heartbeat (500 ms), so a takeover within it shows the
/// death was seen, not the expiry waited for; the paused process outlives it.
const LEASE_MS: u64 = 4000;
const STEPS: usize = 4;
const SESSIONS: usize = 30;
const PROMPTS: usize = 3;
const WATCHED: usize = 6;
/// Sessions with work in flight on process 1 when it is paused.
const MID_FLIGHT: i64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_survive_a_killed_and_a_paused_process() {
    let Some(database) = support::url() else {
        return;
    };
    let key = fresh_key();
    let (effects, _scratch) = scratch();
    let spec = NodeSpec::new(LEASE_MS, STEPS);
    let (mut nodes, cluster) = start_three(&node_binary(), &database, key.as_str(), &effects, spec);

    // Three Agent-scope timers firing every second, armed through process 1.
    let ticker = ExtensionId::new("example-ticker").unwrap();
    cluster
        .client(1)
        .call_extension(
            &ticker,
            "arm",
            json!({"count": 3, "cadence": "* * * * * *", "requestId": "arm-once"}),
        )
        .await
        .unwrap();

    let sessions = create_sessions(&cluster, SESSIONS).await;
    let watchers = watch_all(&cluster, 2, &sessions[..WATCHED]);

    let drivers: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(index, id)| tokio::spawn(drive(cluster.clone(), index, id.clone(), PROMPTS)))
        .collect();

    // Mid-run: kill process 0 and pause process 1; process 2 takes over the killed
    // Sessions; process 1 is continued past its lease. Both happen once process 1 has
    // work in flight (at a fixed time it sometimes had none left, and then no stale
    // commit was there for the fence to refuse).
    let open_on = "SELECT count(*) FROM session_leases l JOIN sessions s \
         ON s.agent_id = l.agent_id AND s.id = l.session_id \
         WHERE l.agent_id = $1 AND s.open_from IS NOT NULL AND l.holder = $2";
    let started = Instant::now();
    let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
    loop {
        let open: i64 = sqlx::query_scalar(open_on)
            .bind(key.as_str())
            .bind(&nodes[1].holder)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if open >= MID_FLIGHT && started.elapsed() >= Duration::from_millis(500) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "process 1 never had {MID_FLIGHT} Sessions with work in flight"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(conn);
    let killed_at_ms = now_ms();
    eprintln!("killing process 0 at {killed_at_ms}");
    cluster.set(0, None);
    let killed = Instant::now();
    nodes[0].kill();
    // Pause process 1 at once, while its runs are mid-flight: a run that finished
    // before the pause would leave nothing for the fencing token to refuse.
    nodes[1].signal("-STOP");
    let paused = Instant::now();
    let victim = nodes[0].holder.clone();
    let taken_over = loop {
        let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
        let count: i64 = sqlx::query_scalar(open_on)
            .bind(key.as_str())
            .bind(&victim)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if count == 0 {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "{count} Sessions of the killed process were never taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the killed process's Sessions were freed after {taken_over:?}");
    assert!(
        taken_over < Duration::from_millis(LEASE_MS),
        "freed after {taken_over:?}, not before the lease of {LEASE_MS} ms lapsed"
    );

    // Continue process 1 once its leases have long expired and been taken over.
    let pause = Duration::from_millis(LEASE_MS * 2);
    tokio::time::sleep(pause.saturating_sub(paused.elapsed())).await;
    nodes[1].signal("-CONT");

    let mut accepted = Vec::new();
    for driver in drivers {
        accepted.extend(driver.await.unwrap());
    }
    assert_eq!(accepted.len(), SESSIONS * PROMPTS);

    // Every watched Session's subscriber catches up with the database.
    for (session, seen, task) in &watchers {
        let committed = committed(&database, key.as_str(), session).await;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let caught_up = {
                let seen = seen.lock().unwrap();
                seen.messages.len() >= committed.0.len()
                    && seen.terminals.len() >= committed.1.len()
            };
            if caught_up || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let seen = seen.lock().unwrap();
        assert!(
            !seen.cut,
            "session {session}: the subscription on process 2 failed"
        );
        assert_eq!(
            seen.messages.first().map(|(sequence, _)| *sequence),
            committed.0.first().map(|(sequence, _)| *sequence),
            "session {session}: the watch began at the first message"
        );
        assert_saw_everything(session, &seen, &committed, None);
        task.abort();
    }

    // Let the timers fire a little longer, then stop everything.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for node in nodes.iter_mut().skip(1) {
        node.kill();
    }

    assert_nothing_lost_or_doubled(&database, key.as_str(), &effects, &accepted).await;
    let executions = marks(&effects);
    assert!(executions <= SESSIONS * PROMPTS * STEPS);
    assert!(executions >= SESSIONS * PROMPTS * STEPS / 2);
    let paused_log = nodes[1].log_text();
    assert!(
        paused_log.contains("fencing token rejected"),
        "the paused process never had a commit fenced; its log:\n{paused_log}"
    );

    // No timer occurrence fired twice, and the survivors kept firing after the kill.
    let fired = query_rows(
        &database,
        "SELECT key FROM extension_rows WHERE agent_id = $1 \
           AND extension_id = 'example-ticker' AND collection = 'fired'",
        key.as_str(),
    )
    .await;
    let mut occurrences: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in &fired {
        let key: String = row.get(0);
        let mut parts = key.splitn(3, '@');
        let (timer, due, process) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        occurrences
            .entry(format!("{timer}@{due}"))
            .or_default()
            .push(process.to_owned());
    }
    let twice: Vec<_> = occurrences
        .iter()
        .filter(|(_, processes)| processes.len() > 1)
        .collect();
    assert!(twice.is_empty(), "fired twice: {twice:?}");
    let after_kill = occurrences
        .keys()
        .filter(|occurrence| {
            let due: u64 = occurrence.split('@').nth(1).unwrap().parse().unwrap();
            due > killed_at_ms
        })
        .count();
    assert!(after_kill >= 3, "only {after_kill} firings after the kill");
}
