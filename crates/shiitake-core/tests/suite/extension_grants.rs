//! Every grant is enforced: using what was not granted fails with `not_granted`
//! (or, for what the host offers rather than the extension asks, is not offered).

#![allow(clippy::unwrap_used)]

use crate::support::probe;

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::extension::{Grant, Grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

async fn agent_without(
    grant: Grant,
    turns: Vec<Turn>,
) -> (tempfile::TempDir, Arc<ScriptedModel>, shiitake_core::Agent) {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let agent = probe::agent(
        &dir.path().join("agent.db"),
        model.clone(),
        probe::Probe::new(),
        Grants::all().without(grant),
    )
    .await;
    (dir, model, agent)
}

async fn refused(grant: Grant, command: &str, input: serde_json::Value) {
    let (_dir, _model, agent) = agent_without(grant, vec![]).await;
    let session = new_session(&agent).await;
    let error = session
        .call_extension(&probe::id(), command, input)
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted, "{grant}: {error}");
    assert!(error.message.contains(&grant.to_string()), "{error}");
    assert_eq!(
        agent.list_extensions().await.unwrap()[0].state,
        ExtensionRunState::Running,
        "not a failure of the extension"
    );
}

#[tokio::test]
async fn state_needs_its_grant() {
    refused(Grant::State, "add", json!({"by": 1})).await;
}

#[tokio::test]
async fn commands_need_their_grant() {
    refused(Grant::Commands, "add", json!({"by": 1})).await;
    let (_dir, _model, agent) = agent_without(Grant::Commands, vec![]).await;
    let error = agent
        .call_extension(&probe::id(), "add", json!({"by": 1}))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted);
}

#[tokio::test]
async fn admissions_need_their_grant() {
    refused(Grant::Admissions, "admit", json!({"text": "hi"})).await;
}

#[tokio::test]
async fn timers_need_their_grant() {
    refused(Grant::Timers, "timer", json!({"afterMs": 10})).await;
}

#[tokio::test]
async fn attention_needs_its_grant() {
    refused(Grant::Attention, "attention", json!({"inbox": true})).await;
}

#[tokio::test]
async fn projection_needs_its_grant() {
    let (_dir, _model, agent) = agent_without(Grant::Projection, vec![]).await;
    let session = new_session(&agent).await;
    session
        .call_extension(&probe::id(), "add", json!({"by": 1}))
        .await
        .unwrap();
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        snapshot.extensions.get(&probe::id()),
        None,
        "no projection grant: the slot is absent"
    );
}

#[tokio::test]
async fn prompt_sections_need_their_grant() {
    let (_dir, model, agent) = agent_without(Grant::Prompt, vec![Turn::text("ok")]).await;
    let session = new_session(&agent).await;
    let command = send(&session, "hi").await;
    terminal_of(&session, &command).await;
    assert!(!model.requests()[0].system_prompt.contains("Probe context."));
    assert_eq!(
        model.requests()[0].tools.len(),
        1,
        "tools are still offered"
    );
}

#[tokio::test]
async fn tools_need_their_grant() {
    let (_dir, model, agent) = agent_without(Grant::Tools, vec![Turn::text("ok")]).await;
    let session = new_session(&agent).await;
    let command = send(&session, "hi").await;
    terminal_of(&session, &command).await;
    assert!(model.requests()[0].tools.is_empty());
    assert!(
        model.requests()[0].system_prompt.contains("Probe context."),
        "the prompt section is still added"
    );
}

#[tokio::test]
async fn files_need_their_grant() {
    let prompt_with = |grants: Grants| async move {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("ok")])));
        let agent =
            probe::agent_with_files(&dir.path().join("agent.db"), model.clone(), grants).await;
        let session = new_session(&agent).await;
        let command = send(&session, "hi").await;
        terminal_of(&session, &command).await;
        model.requests()[0].system_prompt.clone()
    };
    assert!(
        prompt_with(Grants::all())
            .await
            .contains("[files: the host's files]")
    );
    assert!(
        prompt_with(Grants::all().without(Grant::Files))
            .await
            .contains("[files: not granted: files]")
    );
}

#[tokio::test]
async fn a_handed_file_port_offers_tools_with_files_alone() {
    let tools_with = |grants: Grants, with_port: bool| async move {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("ok")])));
        let path = dir.path().join("agent.db");
        let agent = if with_port {
            probe::agent_with_files(&path, model.clone(), grants).await
        } else {
            probe::agent(&path, model.clone(), probe::Probe::new(), grants).await
        };
        let session = new_session(&agent).await;
        let command = send(&session, "hi").await;
        terminal_of(&session, &command).await;
        model.requests()[0].tools.len()
    };
    let no_tools = Grants::all().without(Grant::Tools);
    assert_eq!(
        tools_with(no_tools.clone(), true).await,
        1,
        "files and a handed port: the tools over it are offered"
    );
    assert_eq!(
        tools_with(no_tools.clone(), false).await,
        0,
        "files without a port offers nothing"
    );
    assert_eq!(
        tools_with(no_tools.without(Grant::Files), true).await,
        0,
        "a port without the files grant offers nothing"
    );
}
