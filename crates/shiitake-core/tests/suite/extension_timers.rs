//! Durable timers: a due timer fires once, by the transaction that claims it,
//! even with two schedulers racing over the same database.

#![allow(clippy::unwrap_used)]

use crate::support::probe;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::clock::now_ms;
use shiitake_core::extension::Grants;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::*;
use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(Script::new(vec![])))
}

fn fired(snapshot: &SessionSnapshot) -> Option<i64> {
    match snapshot.extensions.get(&probe::id()) {
        Some(ExtensionSlotV0::Running { value }) => value["fired"].as_i64(),
        _ => None,
    }
}

#[tokio::test]
async fn a_session_timer_fires_once_through_its_hook() {
    let dir = tempfile::tempdir().unwrap();
    let agent = probe::agent(
        &dir.path().join("agent.db"),
        model(),
        probe::Probe::new(),
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    session
        .call_extension(&probe::id(), "timer", json!({"afterMs": 150}))
        .await
        .unwrap();
    let count = wait_for(
        &session,
        |snapshot| fired(snapshot).filter(|n| *n > 0),
        |frame| match frame {
            SessionFrame::Update(update) => match update.extensions.get(&probe::id()) {
                Some(ExtensionSlotV0::Running { value }) => {
                    value["fired"].as_i64().filter(|n| *n > 0)
                }
                _ => None,
            },
            _ => None,
        },
    )
    .await;
    assert_eq!(count, 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        fired(&session.read(ReadOptions::default()).await.unwrap()),
        Some(1),
        "a one-shot timer fires once"
    );
}

#[tokio::test]
async fn two_schedulers_racing_fire_each_timer_once() {
    const TIMERS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let setter = probe::agent(&path, model(), probe::Probe::new(), Grants::all()).await;
    let due = now_ms() + 500;
    setter
        .call_extension(&probe::id(), "arm", json!({"count": TIMERS, "atMs": due}))
        .await
        .unwrap();
    setter.close().await.unwrap();

    // Two Agents on the same file, each with its own writer and scheduler.
    let (probe_a, probe_b) = (
        probe::Probe::new().named("A"),
        probe::Probe::new().named("B"),
    );
    let (attempts_a, attempts_b) = (probe_a.attempts.clone(), probe_b.attempts.clone());
    let (a, b) = tokio::join!(
        probe::agent(&path, model(), probe_a, Grants::all()),
        probe::agent(&path, model(), probe_b, Grants::all()),
    );
    let mut conn = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM timers")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left} timers never fired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT key FROM extension_rows WHERE collection = 'fired' AND scope = 'agent'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut per_timer: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in keys {
        let (timer, agent) = key.rsplit_once('-').unwrap();
        per_timer
            .entry(timer.to_owned())
            .or_default()
            .push(agent.to_owned());
    }
    assert_eq!(per_timer.len(), TIMERS, "every timer fired");
    let by_a = per_timer
        .values()
        .filter(|agents| agents == &&vec!["A".to_owned()])
        .count();
    let attempts = (
        attempts_a.load(std::sync::atomic::Ordering::SeqCst),
        attempts_b.load(std::sync::atomic::Ordering::SeqCst),
    );
    eprintln!(
        "timers fired by A: {by_a}, by B: {}; hook runs {attempts:?}",
        TIMERS - by_a
    );
    assert!(
        attempts.0 + attempts.1 >= TIMERS,
        "the hooks ran: {attempts:?}"
    );
    for (timer, agents) in &per_timer {
        assert_eq!(agents.len(), 1, "timer {timer} fired in {agents:?}");
    }
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test]
async fn a_cron_cadence_fires_again_and_again_until_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let agent = probe::agent(&path, model(), probe::Probe::new(), Grants::all()).await;
    let session = new_session(&agent).await;
    session
        .call_extension(&probe::id(), "cron", json!({"expression": "* * * * * *"}))
        .await
        .unwrap();
    let fired_twice = wait_for(
        &session,
        |snapshot| fired(snapshot).filter(|n| *n >= 2),
        |frame| match frame {
            SessionFrame::Update(update) => match update.extensions.get(&probe::id()) {
                Some(ExtensionSlotV0::Running { value }) => {
                    value["fired"].as_i64().filter(|n| *n >= 2)
                }
                _ => None,
            },
            _ => None,
        },
    )
    .await;
    assert!(fired_twice >= 2);
    let mut conn = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let cadence: Option<String> = sqlx::query_scalar("SELECT cadence FROM timers")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        cadence.as_deref(),
        Some("* * * * * *"),
        "a cadence stays, moved to its next time"
    );
}
