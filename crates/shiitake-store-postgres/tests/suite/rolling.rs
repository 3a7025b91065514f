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
    Node, NodeSpec, assert_nothing_lost_or_doubled, check_and_stop, committed, create_sessions,
    drive_all, node_binary, scratch, spawn_node, start_three, stop_driving, watch_all,
};

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use support::fresh_key;

const LEASE_MS: u64 = 10_000;
const STEPS: usize = 4;
const SESSIONS: usize = 18;
const WATCHED: usize = 4;

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
    let spec = NodeSpec::new(LEASE_MS, STEPS);
    let (mut nodes, cluster) = start_three(&node_binary(), &database, key.as_str(), &effects, spec);
    let sessions = create_sessions(&cluster, SESSIONS).await;
    let watched = &sessions[..WATCHED];
    let mut on_two = watch_all(&cluster, 2, watched);
    let stop = Arc::new(AtomicBool::new(false));
    let drivers = drive_all(&cluster, &sessions, &stop);

    let started = Instant::now();
    let mut on_new_zero = Vec::new();
    for (process, node) in nodes.iter_mut().enumerate() {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        if process == 2 {
            // Process 2 is about to go: its subscribers saw everything up to here.
            check_and_stop(&database, key.as_str(), std::mem::take(&mut on_two)).await;
        }
        cluster.set(process, None);
        let (status, took) = node.drain();
        assert_drained_cleanly(node, status, took);
        *node = spawn_node(
            &database,
            key.as_str(),
            &effects,
            &format!("node{process}-again"),
            spec,
        );
        cluster.set(process, Some(&node.url));
        if process == 0 {
            on_new_zero = watch_all(&cluster, 0, watched);
        }
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let accepted: Vec<_> = stop_driving(&stop, drivers)
        .await
        .into_iter()
        .map(|(command, _)| command)
        .collect();
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
    for (session, seen, _) in &on_new_zero {
        let last = committed(&database, key.as_str(), session)
            .await
            .0
            .last()
            .map(|(sequence, _)| *sequence);
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
        let seen_last = seen
            .lock()
            .unwrap()
            .messages
            .last()
            .map(|(sequence, _)| *sequence);
        assert_eq!(
            seen_last, last,
            "session {session}: the subscriber never caught up"
        );
    }
    check_and_stop(&database, key.as_str(), on_new_zero).await;
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
