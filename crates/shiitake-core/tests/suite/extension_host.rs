//! The extension host: atomic owner transactions, grants, stop/resume, idempotent
//! human commands, projections in snapshots and frames, origins, prompt sections,
//! attention and catalogs.

#![allow(clippy::unwrap_used)]

use crate::support::probe;

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::extension::host::PROMPT_SECTION_LIMIT;
use shiitake_core::extension::{Grant, Grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

async fn setup(
    turns: Vec<Turn>,
    grants: Grants,
) -> (tempfile::TempDir, Arc<ScriptedModel>, shiitake_core::Agent) {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let agent = probe::agent(
        &dir.path().join("agent.db"),
        model.clone(),
        probe::Probe::new(),
        grants,
    )
    .await;
    (dir, model, agent)
}

fn slot(snapshot: &SessionSnapshot) -> Option<ExtensionSlotV0> {
    snapshot.extensions.get(&probe::id()).cloned()
}

fn projection(snapshot: &SessionSnapshot) -> Value {
    match slot(snapshot) {
        Some(ExtensionSlotV0::Running { value }) => value,
        other => panic!("expected a running slot, got {other:?}"),
    }
}

#[tokio::test]
async fn a_command_commits_state_and_the_projection_shows_it() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let session = new_session(&agent).await;
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let answer = session
        .call_extension(&probe::id(), "add", json!({"by": 3}))
        .await
        .unwrap();
    assert_eq!(answer, json!(3));
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(projection(&snapshot)["added"], json!(3));
    let Some(Ok(SessionFrame::Update(update))) = frames.next().await else {
        panic!("an update")
    };
    assert_eq!(
        update.extensions.get(&probe::id()),
        Some(&ExtensionSlotV0::Running {
            value: projection(&snapshot)
        }),
        "frames carry the same slot"
    );
}

#[tokio::test]
async fn a_failing_hook_leaves_nothing_and_stops_only_its_extension() {
    let (_dir, model, agent) = setup(vec![Turn::text("still works")], Grants::all()).await;
    let session = new_session(&agent).await;
    session
        .call_extension(&probe::id(), "add", json!({"by": 1}))
        .await
        .unwrap();
    let error = session
        .call_extension(&probe::id(), "fail", json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Stopped);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        snapshot.pending,
        SessionPendingPrompts::default(),
        "the admitted prompt was not committed"
    );
    assert_eq!(
        slot(&snapshot),
        Some(ExtensionSlotV0::Stopped {
            reason: "the probe failed on purpose".into()
        })
    );
    // The Session keeps working.
    let command = send(&session, "hello").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(model.calls(), 1);
    // Resumed, the extension sees its state as it was before the failed hook.
    let status = agent.resume_extension(&probe::id()).await.unwrap();
    assert_eq!(status.state, ExtensionRunState::Running);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(projection(&snapshot)["added"], json!(1), "no partial rows");
}

#[tokio::test]
async fn a_panicking_hook_stops_its_extension_with_the_reason() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let session = new_session(&agent).await;
    let error = session
        .call_extension(&probe::id(), "panic", json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Stopped);
    let statuses = agent.list_extensions().await.unwrap();
    assert_eq!(
        statuses[0].state,
        ExtensionRunState::Stopped {
            reason: "hook panicked: the probe panicked on purpose".into()
        }
    );
    let refused = session
        .call_extension(&probe::id(), "add", json!({"by": 1}))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code,
        ErrorCode::Stopped,
        "a stopped extension takes no commands"
    );
}

#[tokio::test]
async fn a_bad_input_is_the_callers_error_and_stops_nothing() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let session = new_session(&agent).await;
    let invalid = session
        .call_extension(&probe::id(), "add", json!({"by": "x"}))
        .await
        .unwrap_err();
    assert_eq!(invalid.code, ErrorCode::Invalid);
    let unknown = session
        .call_extension(&probe::id(), "nope", json!({}))
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(
        agent.list_extensions().await.unwrap()[0].state,
        ExtensionRunState::Running
    );
}

#[tokio::test]
async fn human_commands_are_idempotent_by_request_id() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let session = new_session(&agent).await;
    let id = probe::id();
    let call =
        |by: i64| session.call_extension(&id, "add", json!({"by": by, "requestId": "human-1"}));
    assert_eq!(call(5).await.unwrap(), json!(5));
    assert_eq!(
        call(5).await.unwrap(),
        json!(5),
        "an exact retry answers the original receipt"
    );
    assert_eq!(call(6).await.unwrap_err().code, ErrorCode::Conflict);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(projection(&snapshot)["added"], json!(5));
    // Agent scope keeps its own receipts.
    let agent_call = || agent.call_extension(&id, "add", json!({"by": 2, "requestId": "human-1"}));
    assert_eq!(agent_call().await.unwrap(), json!(2));
    assert_eq!(agent_call().await.unwrap(), json!(2));
}

#[tokio::test]
async fn admissions_carry_their_origin_to_runs_and_settled_hooks() {
    let turns = vec![Turn::text("admitted run"), Turn::text("human run")];
    let (_dir, model, agent) = setup(turns, Grants::all()).await;
    let session = new_session(&agent).await;
    session
        .call_extension(
            &probe::id(),
            "admit",
            json!({"text": "keep going", "correlation": "continue"}),
        )
        .await
        .unwrap();
    let first = wait_for(
        &session,
        |snapshot| snapshot.terminals.first().cloned(),
        |frame| match frame {
            SessionFrame::Update(update) => update.terminals.first().cloned(),
            _ => None,
        },
    )
    .await;
    assert_eq!(first.outcome, TerminalOutcome::Completed);
    let human = send(&session, "hello").await;
    terminal_of(&session, &human).await;

    let requests = model.requests();
    assert!(
        requests[0]
            .system_prompt
            .ends_with("Probe context. CONTINUE DIRECTIVE"),
        "{}",
        requests[0].system_prompt
    );
    assert!(
        requests[1].system_prompt.ends_with("Probe context."),
        "only runs it admitted get the directive"
    );
    assert_eq!(outline(&requests[0].messages), vec!["user: keep going"]);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(projection(&snapshot)["settled"], json!(2));
    assert_eq!(
        projection(&snapshot)["last"],
        json!({"outcome": "completed", "correlation": null})
    );
}

#[tokio::test]
async fn tools_change_state_through_owner_transactions() {
    let turns = vec![
        Turn::tool_call("probe__bump", json!({})),
        Turn::text("bumped"),
    ];
    let (_dir, model, agent) = setup(turns, Grants::all()).await;
    let session = new_session(&agent).await;
    let command = send(&session, "bump it").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(projection(&snapshot)["bumped"], json!(1));
    let tools: Vec<_> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(tools, vec!["probe__bump"]);
    assert_eq!(
        outline(&transcript(&session).await)[2],
        "tool probe__bump: 1"
    );
}

#[tokio::test]
async fn prompt_sections_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("ok")])));
    let long = "x".repeat(PROMPT_SECTION_LIMIT * 2);
    let probe = probe::Probe::new().with_section(long);
    let agent = probe::agent(
        &dir.path().join("agent.db"),
        model.clone(),
        probe,
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let command = send(&session, "hi").await;
    terminal_of(&session, &command).await;
    let system = &model.requests()[0].system_prompt;
    let section = system.rsplit("\n\n").next().unwrap();
    assert_eq!(section.len(), PROMPT_SECTION_LIMIT);
    assert!(section.ends_with("…[truncated]"));
}

#[tokio::test]
async fn inbox_attention_makes_the_session_need_you() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let session = new_session(&agent).await;
    let state = |agent: shiitake_core::Agent| async move {
        let page = agent.list_sessions(None).await.unwrap();
        match &page.sessions[0] {
            SessionSummaryRow::Available { summary, .. } => summary.state,
            SessionSummaryRow::Unavailable { .. } => panic!("readable"),
        }
    };
    assert_eq!(state(agent.clone()).await, SessionInboxState::Done);
    session
        .call_extension(&probe::id(), "attention", json!({"inbox": true}))
        .await
        .unwrap();
    assert_eq!(state(agent.clone()).await, SessionInboxState::NeedsYou);
    session
        .call_extension(&probe::id(), "clear_attention", json!({}))
        .await
        .unwrap();
    assert_eq!(state(agent.clone()).await, SessionInboxState::Done);
    session
        .call_extension(&probe::id(), "attention", json!({"inbox": false}))
        .await
        .unwrap();
    assert_eq!(
        state(agent.clone()).await,
        SessionInboxState::Done,
        "inbox: false stays out of the inbox"
    );
}

#[tokio::test]
async fn catalogs_list_human_command_flows() {
    let (_dir, _model, agent) = setup(vec![], Grants::all()).await;
    let catalogs = agent.catalogs().await.unwrap();
    assert_eq!(catalogs.catalogs.len(), 1);
    assert_eq!(catalogs.catalogs[0].catalog.commands[0].name, "add");
    assert_eq!(catalogs.catalogs[0].state, ExtensionRunState::Running);
    let (_dir, _model, ungranted) = setup(vec![], Grants::all().without(Grant::Commands)).await;
    assert!(
        ungranted.catalogs().await.unwrap().catalogs.is_empty(),
        "no commands, no catalog"
    );
}
