//! Agent-scope admission: an Agent command or an Agent timer admits a prompt into a
//! named Session through its accepted-command door, with origin and correlation;
//! the door's answer reaches the extension's admission hook once; the same
//! occurrence (request id) admitted twice queues one prompt.

#![allow(clippy::unwrap_used)]

use crate::support::harness;
use crate::support::probe;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_core::extension::{Grant, Grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

fn slot(snapshot: &SessionSnapshot) -> Value {
    match snapshot.extensions.get(&probe::id()) {
        Some(ExtensionSlotV0::Running { value }) => value.clone(),
        other => panic!("no probe slot: {other:?}"),
    }
}

/// Reads the probe's slot through `session` until `done` holds.
async fn until(session: &shiitake_core::LocalSession, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let value = slot(&session.read(ReadOptions::default()).await.unwrap());
        if done(&value) {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {value}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn commands_with_request(path: &std::path::Path, request_id: &str) -> Vec<(String, String)> {
    let mut conn = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .connect()
        .await
        .unwrap();
    sqlx::query_as("SELECT session_id, origin FROM commands WHERE request_id = ?")
        .bind(request_id)
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agent_command_admits_into_a_named_session_with_origin_and_correlation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("done")])));
    let agent = probe::agent(&path, model.clone(), probe::Probe::new(), Grants::all()).await;
    let session = new_session(&agent).await;
    let answer = agent
        .call_extension(
            &probe::id(),
            "admit_into",
            json!({"sessionId": session.session_id(), "occurrence": "occ-1",
                   "text": "Water the plants", "correlation": "schedule-7"}),
        )
        .await
        .unwrap();
    assert_eq!(answer, json!("admitting"));
    // The run it started settled, and its settled hook saw the origin's correlation.
    let value = until(&session, |v| v["settled"] == json!(1)).await;
    assert_eq!(
        value["last"],
        json!({"outcome": "completed", "correlation": "schedule-7"})
    );
    let command_id = value["admissions"]["occ-1"]["outcome"]["accepted"].clone();
    assert!(command_id.is_string(), "{value}");
    assert_eq!(
        value["admissions"]["occ-1"],
        json!({"sessionId": session.session_id(), "correlation": "schedule-7",
               "outcome": {"accepted": command_id}})
    );
    assert_eq!(value["admissionRuns"]["occ-1"], json!(1));
    let stored = commands_with_request(&path, "occ-1").await;
    assert_eq!(stored.len(), 1);
    let origin: Value = serde_json::from_str(&stored[0].1).unwrap();
    assert_eq!(
        origin,
        json!({"extensionId": probe::ID, "correlation": "schedule-7"})
    );
    // The model saw the admitted text as the user's prompt.
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let texts: Vec<String> = snapshot
        .messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("Water the plants")),
        "{texts:?}"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn the_same_occurrence_admitted_twice_queues_one_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::text("once"),
        Turn::text("twice?"),
    ])));
    let agent = probe::agent(&path, model, probe::Probe::new(), Grants::all()).await;
    let session = new_session(&agent).await;
    let input = json!({"sessionId": session.session_id(), "occurrence": "occ-2", "text": "Once"});
    agent
        .call_extension(&probe::id(), "admit_into", input.clone())
        .await
        .unwrap();
    let first = until(&session, |v| v["admissionRuns"]["occ-2"] == json!(1)).await;
    agent
        .call_extension(&probe::id(), "admit_into", input)
        .await
        .unwrap();
    let second = until(&session, |v| v["admissionRuns"]["occ-2"] == json!(2)).await;
    assert_eq!(
        first["admissions"]["occ-2"], second["admissions"]["occ-2"],
        "the door answered the original command"
    );
    until(&session, |v| v["settled"] == json!(1)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        slot(&session.read(ReadOptions::default()).await.unwrap())["settled"],
        json!(1)
    );
    assert_eq!(commands_with_request(&path, "occ-2").await.len(), 1);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_refused_admission_reaches_the_hook_with_the_doors_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let agent = probe::agent(&path, model, probe::Probe::new(), Grants::all()).await;
    let watcher = new_session(&agent).await;
    let gone = new_session(&agent).await;
    agent.delete_session(gone.session_id()).await.unwrap();
    agent
        .call_extension(
            &probe::id(),
            "admit_into",
            json!({"sessionId": gone.session_id(), "occurrence": "occ-3"}),
        )
        .await
        .unwrap();
    let value = until(&watcher, |v| v["admissions"]["occ-3"].is_object()).await;
    assert_eq!(
        value["admissions"]["occ-3"]["outcome"],
        json!({"refused": "not_found"})
    );
    assert_eq!(value["admissionRuns"]["occ-3"], json!(1));
    assert!(commands_with_request(&path, "occ-3").await.is_empty());
    agent.close().await.unwrap();
}

#[tokio::test]
async fn admitting_without_the_admissions_grant_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let agent = probe::agent(
        &dir.path().join("agent.db"),
        model,
        probe::Probe::new(),
        Grants::all().without(Grant::Admissions),
    )
    .await;
    let session = new_session(&agent).await;
    let error = agent
        .call_extension(
            &probe::id(),
            "admit_into",
            json!({"sessionId": session.session_id(), "occurrence": "occ-4"}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn an_agent_timer_admits_when_a_paused_clock_reaches_it_and_after_a_restart_not_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let start = 1_795_996_800_000;
    let clock = ManualClock::new(start);
    let open = |script: Vec<Turn>| {
        let mut config = harness::config(Arc::new(ScriptedModel::new(Script::new(script))));
        config.clock = clock.clone();
        probe::agent_with(&path, config, probe::Probe::new(), Grants::all())
    };
    let agent = open(vec![Turn::text("ok")]).await;
    let session = new_session(&agent).await;
    agent
        .call_extension(
            &probe::id(),
            "arm_admission",
            json!({"atMs": start + 60_000, "sessionId": session.session_id(),
                   "occurrence": "timer-occ", "correlation": "timed"}),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(commands_with_request(&path, "timer-occ").await.is_empty());
    clock.advance(Duration::from_secs(60));
    let value = until(&session, |v| v["settled"] == json!(1)).await;
    assert_eq!(value["last"]["correlation"], json!("timed"));
    agent.close().await.unwrap();

    let agent = open(vec![Turn::text("again?")]).await;
    clock.advance(Duration::from_secs(3600));
    let session = agent.session(session.session_id().clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let value = slot(&session.read(ReadOptions::default()).await.unwrap());
    assert_eq!(value["settled"], json!(1));
    assert_eq!(value["admissionRuns"]["timer-occ"], json!(1));
    assert_eq!(commands_with_request(&path, "timer-occ").await.len(), 1);
    agent.close().await.unwrap();
}
