//! A rolling restart: three Hub processes under load, each in turn sent SIGTERM,
//! waited for, and started again, as a deploy does.
//!
//! A process that is told to stop drains (`Agent::close`): it takes no more
//! Sessions, hands every lease over with a notification and exits, so the others
//! resume its runs at once. Then:
//!
//! - every drained process exits cleanly (status 0, `DRAINED`), without the warning
//!   the PostgreSQL listener used to print as its pool closed;
//! - no accepted command is lost or run twice (each `hub.mark` execution once), and
//!   none ends `interrupted`;
//! - a handover is not a crash: no command counts a recovery;
//! - a subscriber on a process that is not restarted meanwhile misses no frame: one on
//!   process 2 sees everything until process 2 itself restarts, one started on the
//!   new process 0 sees everything through the restarts of processes 1 and 2.
//!
//! A lease of 10 s, as in production: a Session that waited for an expiry would stall
//! the drivers for that long (the benchmark measures the stalls; this test asserts
//! what must hold).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::cluster::{
    Cluster, Node, NodeSpec, Seen, assert_nothing_lost_or_doubled, assert_saw_everything,
    committed, prompt_and_settle, scratch, spawn_node, subscribe,
};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shiitake_protocol::{AgentApi, CommandId, RequestId, SessionId};
use support::fresh_key;

const LEASE_MS: u64 = 10_000;
const STEPS: usize = 4;
const SESSIONS: usize = 18;
const WATCHED: usize = 4;

/// Prompts one after the other on `session` until `stop`, each through another process.
async fn drive_until(
    cluster: Arc<Cluster>,
    index: usize,
    session: SessionId,
    stop: Arc<AtomicBool>,
) -> Vec<CommandId> {
    let mut accepted = Vec::new();
    let mut prompt = 0;
    while !stop.load(Ordering::SeqCst) {
        let command = prompt_and_settle(
            &cluster,
            index + prompt,
            &session,
            &format!("s{index}-p{prompt}"),
            &format!("prompt {prompt} of session {index}"),
        )
        .await;
        accepted.push(command);
        prompt += 1;
    }
    accepted
}

fn watch_all(
    cluster: &Cluster,
    process: usize,
    sessions: &[SessionId],
) -> Vec<(Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>)> {
    sessions
        .iter()
        .map(|session| {
            let seen: Arc<Mutex<Seen>> = Arc::default();
            let task = tokio::spawn(subscribe(
                cluster.client(process),
                session.clone(),
                seen.clone(),
            ));
            (seen, task)
        })
        .collect()
}

fn assert_drained_cleanly(node: &Node, status: std::process::ExitStatus, took: Duration) {
    let log = node.log_text();
    assert!(
        status.success(),
        "a drained process exited with {status}; its log:\n{log}"
    );
    assert_eq!(
        node.lines
            .recv_timeout(Duration::from_secs(5))
            .ok()
            .as_deref(),
        Some("DRAINED")
    );
    assert!(
        !log.contains("listener failed"),
        "the listener complained as the process left:\n{log}"
    );
    eprintln!("a process drained in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_loses_nothing_and_counts_no_recovery() {
    let Some(database) = support::url() else {
        return;
    };
    let key = fresh_key();
    let (effects, _scratch) = scratch();
    let spec = NodeSpec {
        lease_ms: LEASE_MS,
        steps: STEPS,
        heartbeat_ms: None,
    };
    let mut nodes: Vec<Node> = (0..3)
        .map(|n| spawn_node(&database, key.as_str(), &effects, &format!("node{n}"), spec))
        .collect();
    let cluster = Arc::new(Cluster::new(&nodes));
    let mut sessions = Vec::new();
    for index in 0..SESSIONS {
        let request = RequestId::new(format!("create-{index}")).unwrap();
        sessions.push(
            cluster
                .client(index % 3)
                .create_session(request)
                .await
                .unwrap(),
        );
    }
    let watched = &sessions[..WATCHED];
    let on_two = watch_all(&cluster, 2, watched);
    let stop = Arc::new(AtomicBool::new(false));
    let drivers: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(index, id)| {
            tokio::spawn(drive_until(
                cluster.clone(),
                index,
                id.clone(),
                stop.clone(),
            ))
        })
        .collect();

    let started = Instant::now();
    let mut on_new_zero = Vec::new();
    for process in 0..3 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        if process == 2 {
            // Process 2 is about to go: its subscribers saw everything up to here.
            for (session, (seen, task)) in watched.iter().zip(&on_two) {
                let committed = committed(&database, key.as_str(), session).await;
                let seen = seen.lock().unwrap();
                assert!(
                    !seen.cut,
                    "session {session}: the subscription on process 2 failed"
                );
                let through = seen.messages.last().map(|(sequence, _)| *sequence);
                assert!(
                    through.is_some(),
                    "session {session}: nothing seen on process 2"
                );
                assert_saw_everything(session, &seen, &committed, through);
                task.abort();
            }
        }
        cluster.set(process, None);
        let (status, took) = nodes[process].drain();
        assert_drained_cleanly(&nodes[process], status, took);
        nodes[process] = spawn_node(
            &database,
            key.as_str(),
            &effects,
            &format!("node{process}-again"),
            spec,
        );
        cluster.set(process, Some(&nodes[process].url));
        if process == 0 {
            on_new_zero = watch_all(&cluster, 0, watched);
        }
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    stop.store(true, Ordering::SeqCst);
    let mut accepted = Vec::new();
    for driver in drivers {
        accepted.extend(driver.await.unwrap());
    }
    eprintln!(
        "{} prompts settled through a rolling restart of {:?}",
        accepted.len(),
        started.elapsed()
    );
    assert!(
        accepted.len() >= SESSIONS * 2,
        "only {} prompts",
        accepted.len()
    );

    // The subscribers on the new process 0 saw every frame through two restarts.
    for (session, (seen, task)) in watched.iter().zip(&on_new_zero) {
        let committed = committed(&database, key.as_str(), session).await;
        let last = committed.0.last().map(|(sequence, _)| *sequence);
        let deadline = Instant::now() + Duration::from_secs(15);
        while seen
            .lock()
            .unwrap()
            .messages
            .last()
            .map(|(sequence, _)| *sequence)
            < last
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let seen = seen.lock().unwrap();
        assert!(
            !seen.cut,
            "session {session}: the subscription on the new process 0 failed"
        );
        assert_saw_everything(session, &seen, &committed, None);
        task.abort();
    }
    for node in &mut nodes {
        node.kill();
    }
    let recoveries =
        assert_nothing_lost_or_doubled(&database, key.as_str(), &effects, &accepted).await;
    let counted: Vec<_> = recoveries.iter().filter(|(_, count)| **count > 0).collect();
    assert!(
        counted.is_empty(),
        "a handover was counted as a recovery: {counted:?}"
    );
}
