//! Timers across processes: a Loop on a 2-second cadence and an Almanac schedule
//! every 3 seconds, in a cluster of three Hub processes of which one is killed,
//! another killed, and one drained (each started again), while the timers fire.
//!
//! `hub_node` runs the real Loop and Almanac extensions, each wrapped so that every
//! timer firing writes a row in the transaction that claims it (and every Almanac
//! admission likewise): an occurrence claimed twice would show as two rows. Then:
//!
//! - each occurrence fired exactly once: no due time has two firings;
//! - none was lost: each next occurrence is the cadence's first time after the
//!   previous occurrence (or after the moment it fired, when it fired late: an
//!   occurrence missed while nobody could fire it fires once, as after a restart);
//! - the Loop admitted one prompt per firing it did not skip, and Almanac one prompt
//!   per occurrence (each admitted once), and every one of them ran to `completed`.
//!
//! And a delivery whose process died midway (it fired the occurrence and was waiting
//! on the door) is delivered by another process once the Session lease's time has
//! passed, not after the 30 s a single process holds a delivery for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::cluster::{
    Node, NodeSpec, client, node_binary, now_ms, query_rows, scratch, spawn_node, start_three,
};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_protocol::{AgentApi, ExtensionId, ReadOptions, RequestId, SessionApi, SessionId};
use sqlx::Row;
use support::fresh_key;

const LEASE_MS: u64 = 4000;
const LOOP_EVERY_MS: u64 = 2000;
const ALMANAC_EVERY_MS: u64 = 3000;
const LOOP: &str = "botanical-session-loop";
const ALMANAC: &str = "botanical-agent-almanac";

/// The first multiple of `every` strictly after `at` (a cadence of whole seconds).
fn next_after(at: u64, every: u64) -> u64 {
    (at / every + 1) * every
}

/// One recorded firing: (due, fired or admitted at).
type Firing = (u64, u64);

/// The firings recorded in `collection` of `extension`, by due time, each with every
/// process that fired it.
async fn firings(
    database: &str,
    key: &str,
    extension: &str,
    collection: &str,
) -> BTreeMap<String, Vec<u64>> {
    let rows = query_rows(
        database,
        &format!(
            "SELECT key, value FROM extension_rows WHERE agent_id = $1 \
               AND extension_id = '{extension}' AND collection = '{collection}'"
        ),
        key,
    )
    .await;
    let mut by_occurrence: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for row in &rows {
        let key: String = row.get(0);
        let at: u64 = serde_json::from_str(&row.get::<String, _>(1)).unwrap();
        let occurrence = key.split('@').next().unwrap().to_owned();
        by_occurrence.entry(occurrence).or_default().push(at);
    }
    by_occurrence
}

/// Each occurrence fired once; the list of (due, when) in due order.
fn once_each(name: &str, by_due: &BTreeMap<String, Vec<u64>>) -> Vec<Firing> {
    let twice: Vec<_> = by_due.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{name}: occurrences fired more than once: {twice:?}"
    );
    let mut firings: Vec<Firing> = by_due
        .iter()
        .map(|(due, at)| (due.parse().unwrap(), at[0]))
        .collect();
    firings.sort_unstable();
    firings
}

/// No occurrence was lost: each next one is the cadence's first time after the
/// previous occurrence, or after the moment that one was handled when it was late.
/// (`tolerance` covers the few milliseconds between core's clock reading and the
/// hook's.)
fn assert_none_lost(name: &str, firings: &[Firing], every: u64) {
    const TOLERANCE_MS: u64 = 50;
    for pair in firings.windows(2) {
        let ((due, at), (next, _)) = (pair[0], pair[1]);
        let earliest = next_after(due.max(at.saturating_sub(TOLERANCE_MS)), every);
        let latest = next_after(due.max(at + TOLERANCE_MS), every);
        assert!(
            (earliest..=latest).contains(&next),
            "{name}: after the occurrence due {due} (handled at {at}) came {next}, not {earliest}..={latest}: {firings:?}"
        );
    }
}

/// The process holding `session`'s lease, if any.
async fn holder_of(database: &str, key: &str, session: &SessionId) -> Option<String> {
    let rows = query_rows(
        database,
        &format!(
            "SELECT holder FROM session_leases WHERE agent_id = $1 AND session_id = '{}'",
            session.as_str()
        ),
        key,
    )
    .await;
    rows.first().and_then(|row| row.get::<Option<String>, _>(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loop_and_almanac_occurrences_fire_once_across_kills_and_restarts() {
    let Some(database) = support::url() else {
        return;
    };
    let key = fresh_key();
    let (effects, _scratch) = scratch();
    let spec = NodeSpec::new(LEASE_MS, 2);
    let (mut nodes, cluster) = start_three(&node_binary(), &database, key.as_str(), &effects, spec);
    let looped = cluster
        .client(0)
        .create_session(RequestId::new("loop-session").unwrap())
        .await
        .unwrap();
    let target = cluster
        .client(1)
        .create_session(RequestId::new("almanac-session").unwrap())
        .await
        .unwrap();
    cluster
        .client(0)
        .session(looped.clone())
        .call_extension(
            &ExtensionId::new(LOOP).unwrap(),
            "loop",
            json!({"action": "start", "prompt": "loop tick", "cadence": "*/2 * * * * *"}),
        )
        .await
        .unwrap();
    let schedule = cluster
        .client(1)
        .call_extension(
            &ExtensionId::new(ALMANAC).unwrap(),
            "create",
            json!({"sessionId": target.as_str(), "prompt": "almanac tick", "cadence": "*/3 * * * * *"}),
        )
        .await
        .unwrap();
    let schedule_id = schedule["id"].as_str().unwrap().to_owned();

    // Kill the Loop's owner, then another process, then drain the Loop's owner; each
    // is started again at once.
    let index_of = |nodes: &[Node], holder: Option<String>, otherwise: usize| {
        holder
            .and_then(|holder| nodes.iter().position(|node| node.holder == holder))
            .unwrap_or(otherwise)
    };
    let started = Instant::now();
    for (round, drain) in [(0, false), (1, false), (2, true)] {
        tokio::time::sleep(Duration::from_millis(5000)).await;
        let holder = holder_of(&database, key.as_str(), &looped).await;
        let victim = match round {
            1 => (index_of(&nodes, holder, 0) + 1) % 3,
            _ => index_of(&nodes, holder, round),
        };
        cluster.set(victim, None);
        if drain {
            let (status, _) = nodes[victim].drain();
            assert!(status.success(), "a drained process exited with {status}");
        } else {
            nodes[victim].kill();
        }
        eprintln!(
            "{} process {victim} at {:?}",
            if drain { "drained" } else { "killed" },
            started.elapsed()
        );
        nodes[victim] = spawn_node(
            &database,
            key.as_str(),
            &effects,
            &format!("node{victim}-{round}"),
            spec,
        );
        cluster.set(victim, Some(&nodes[victim].url));
    }
    tokio::time::sleep(Duration::from_millis(5000)).await;

    // Stop both, then let what they admitted run out.
    cluster
        .call(0, |client| {
            let looped = looped.clone();
            async move {
                client
                    .session(looped)
                    .call_extension(
                        &ExtensionId::new(LOOP).unwrap(),
                        "loop",
                        json!({"action": "stop", "requestId": "stop-loop"}),
                    )
                    .await
            }
        })
        .await;
    cluster
        .call(0, |client| {
            let schedule_id = schedule_id.clone();
            async move {
                client
                    .call_extension(
                        &ExtensionId::new(ALMANAC).unwrap(),
                        "delete",
                        json!({"scheduleId": schedule_id, "requestId": "delete-schedule"}),
                    )
                    .await
            }
        })
        .await;
    let open = "SELECT count(*) FROM sessions WHERE agent_id = $1 AND open_from IS NOT NULL";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = query_rows(&database, open, key.as_str()).await;
        if rows[0].get::<i64, _>(0) == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "admitted prompts never ran out");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for node in &mut nodes {
        node.kill();
    }

    // The Loop: every occurrence once, none lost, one prompt per occurrence it ran.
    let loop_firings = once_each(
        "loop",
        &firings(&database, key.as_str(), LOOP, "fired").await,
    );
    eprintln!("loop fired {} times: {loop_firings:?}", loop_firings.len());
    assert!(
        loop_firings.len() >= 8,
        "the loop fired only {loop_firings:?}"
    );
    assert_none_lost("loop", &loop_firings, LOOP_EVERY_MS);
    let record = query_rows(
        &database,
        &format!(
            "SELECT value FROM extension_rows WHERE agent_id = $1 AND extension_id = '{LOOP}' \
               AND collection = 'loop' AND key = 'current'"
        ),
        key.as_str(),
    )
    .await;
    let record: Value = serde_json::from_str(&record[0].get::<String, _>(0)).unwrap();
    let (occurrences, skipped) = (
        record["occurrences"].as_u64().unwrap(),
        record["skipped"].as_u64().unwrap(),
    );
    assert_eq!(
        usize::try_from(occurrences + skipped).unwrap(),
        loop_firings.len(),
        "each firing admitted or skipped once: {record}"
    );
    let outcomes = |session: &SessionId| {
        format!(
            "SELECT c.request_id, t.outcome FROM commands c LEFT JOIN terminals t \
               ON t.agent_id = c.agent_id AND t.session_id = c.session_id AND t.command_id = c.id \
             WHERE c.agent_id = $1 AND c.session_id = '{}' AND c.origin IS NOT NULL",
            session.as_str()
        )
    };
    let loop_runs = query_rows(&database, &outcomes(&looped), key.as_str()).await;
    assert_eq!(loop_runs.len(), usize::try_from(occurrences).unwrap());
    for row in &loop_runs {
        assert_eq!(
            row.get::<Option<String>, _>(1).as_deref(),
            Some("completed")
        );
    }

    // Almanac: every occurrence once, admitted once, none lost, each run completed.
    let almanac_firings = once_each(
        "almanac",
        &firings(&database, key.as_str(), ALMANAC, "fired").await,
    );
    eprintln!(
        "almanac fired {} times: {almanac_firings:?}",
        almanac_firings.len()
    );
    assert!(
        almanac_firings.len() >= 5,
        "almanac fired only {almanac_firings:?}"
    );
    let admitted = firings(&database, key.as_str(), ALMANAC, "admitted").await;
    let twice: Vec<_> = admitted.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(twice.is_empty(), "admitted more than once: {twice:?}");
    let admitted_at: BTreeMap<u64, u64> = admitted
        .iter()
        .map(|(request, at)| {
            let occurrence = request.rsplit(':').next().unwrap().parse().unwrap();
            (occurrence, at[0])
        })
        .collect();
    let fired_dues: Vec<u64> = almanac_firings.iter().map(|(due, _)| *due).collect();
    for occurrence in admitted_at.keys() {
        assert!(
            fired_dues.contains(occurrence),
            "occurrence {occurrence} admitted without firing"
        );
    }
    // The next occurrence is armed when the door answers the previous one.
    let handled: Vec<Firing> = almanac_firings
        .iter()
        .map(|(due, fired)| (*due, admitted_at.get(due).copied().unwrap_or(*fired)))
        .collect();
    assert_none_lost("almanac", &handled, ALMANAC_EVERY_MS);
    let almanac_runs = query_rows(&database, &outcomes(&target), key.as_str()).await;
    assert_eq!(almanac_runs.len(), admitted_at.len());
    for row in &almanac_runs {
        let request: String = row.get(0);
        let occurrence: u64 = request.rsplit(':').next().unwrap().parse().unwrap();
        assert!(admitted_at.contains_key(&occurrence), "{request}");
        assert_eq!(
            row.get::<Option<String>, _>(1).as_deref(),
            Some("completed")
        );
    }
}

/// A one-shot schedule fires in process B while the target Session's owner, A, is
/// paused, so B's delivery waits on the door; B is killed then. Process C delivers it
/// once the delivery's hold (the Session lease's time) has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_whose_process_died_midway_is_delivered_after_the_lease_time() {
    let Some(database) = support::url() else {
        return;
    };
    let key = fresh_key();
    let (effects, _scratch) = scratch();
    let spec = NodeSpec::new(LEASE_MS, 2);
    let owner = spawn_node(&database, key.as_str(), &effects, "owner", spec);
    let mut firing = spawn_node(&database, key.as_str(), &effects, "firing", spec);
    let target = client(&owner.url)
        .create_session(RequestId::new("target").unwrap())
        .await
        .unwrap();
    // A read starts the owner, which takes the lease.
    client(&owner.url)
        .session(target.clone())
        .read(ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        holder_of(&database, key.as_str(), &target).await.as_deref(),
        Some(owner.holder.as_str()),
        "the owner holds the target's lease"
    );
    let due = now_ms() + 3000;
    client(&firing.url)
        .call_extension(
            &ExtensionId::new(ALMANAC).unwrap(),
            "create",
            json!({"sessionId": target.as_str(), "prompt": "once", "at": due}),
        )
        .await
        .unwrap();

    // Pause the owner a second before the occurrence, kill the firing process half a
    // second after it: it fired and waits on the door of a paused owner.
    tokio::time::sleep(Duration::from_millis(due - 1000 - now_ms())).await;
    owner.signal("-STOP");
    tokio::time::sleep(Duration::from_millis(due + 500 - now_ms())).await;
    firing.kill();
    let killed_at = now_ms();
    let fired = firings(&database, key.as_str(), ALMANAC, "fired").await;
    assert!(
        fired.values().flatten().all(|at| *at < killed_at) && fired.len() == 1,
        "the occurrence fired before the kill, once: {fired:?}"
    );
    let admitted = firings(&database, key.as_str(), ALMANAC, "admitted").await;
    assert!(
        admitted.is_empty(),
        "nothing admitted while the owner is paused: {admitted:?}"
    );

    let _survivor = spawn_node(&database, key.as_str(), &effects, "survivor", spec);
    let deadline = Instant::now() + Duration::from_secs(40);
    let admitted = loop {
        let admitted = firings(&database, key.as_str(), ALMANAC, "admitted").await;
        if !admitted.is_empty() {
            break admitted;
        }
        assert!(
            Instant::now() < deadline,
            "the occurrence was never admitted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    owner.signal("-CONT");
    let at: Vec<u64> = admitted.values().flatten().copied().collect();
    assert_eq!(at.len(), 1, "admitted once: {admitted:?}");
    let late = at[0] - due;
    eprintln!("admitted {late} ms after it was due");
    // The hold is the lease (4 s) from the firing; a 30 s hold would be far past this.
    assert!(
        late < 3 * LEASE_MS,
        "admitted {late} ms after it was due: the dead process held the delivery longer than a Session lease"
    );
}
