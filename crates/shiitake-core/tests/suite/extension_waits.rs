//! What an extension needs to wait for a person inside a run: a tool handler that
//! waits on its state, the newer-input signal a steer raises, the tool-result hook
//! in the commit of the result, replay of an extension's replay-safe tool after a
//! restart, the host's own transactions and prompts sent by another Agent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::harness;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay};
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, Sender,
    Settled, StateScope, StateView, ToolOutcome, Tx,
};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::message::Message;
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

const ID: &str = "test-waiter";

/// A tool that waits until the `flag` row is set, or newer input arrives.
struct Waiter {
    definition: ExtensionDefinition,
    replay: Replay,
}

impl Waiter {
    fn new(replay: Replay) -> Self {
        Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(ID).unwrap(),
                namespace: "waiter".into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            replay,
        }
    }
}

fn id() -> ExtensionId {
    ExtensionId::new(ID).unwrap()
}

fn push(tx: &mut Tx<'_>, collection: &str, value: Value) -> Result<(), HookError> {
    let mut list: Vec<Value> = tx
        .get(StateScope::Session, collection, "all")?
        .unwrap_or_default();
    list.push(value);
    tx.put(StateScope::Session, collection, "all", &list)
}

impl Extension for Waiter {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, _input: Value) -> Result<Value, HookError> {
        match command {
            "set" => {
                tx.put(StateScope::Session, "flag", "flag", &true)?;
                Ok(json!("set"))
            }
            "read" => Ok(json!(
                tx.get::<bool>(StateScope::Session, "flag", "flag")?
                    .unwrap_or(false)
            )),
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_tool_result(&self, tx: &mut Tx<'_>, outcome: &ToolOutcome) -> Result<(), HookError> {
        push(
            tx,
            "results",
            json!({
                "executionId": outcome.execution_id.as_str(),
                "tool": outcome.tool_name,
                "isError": outcome.is_error,
            }),
        )
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        push(
            tx,
            "senders",
            json!(settled.sender.as_ref().map(|s| s.agent.clone())),
        )
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        Some(json!({
            "results": state.get::<Value>(StateScope::Session, "results", "all"),
            "senders": state.get::<Value>(StateScope::Session, "senders", "all"),
            "attempts": state.get::<Value>(StateScope::Session, "attempts", "all"),
        }))
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let sender = run
            .sender
            .map(|s| format!("Sent by {} from {}.", s.agent, s.session_id))
            .unwrap_or_else(|| "Sent by a person.".into());
        let wait = Operation::from_fn(
            OperationName::new("wait").unwrap(),
            "Waits for the flag.",
            move |_input, ctx| {
                let tools = tools.clone();
                async move {
                    let execution = ctx.execution_id().as_str().to_owned();
                    tools
                        .run(move |tx| {
                            push(tx, "attempts", json!(execution))?;
                            Ok(Value::Null)
                        })
                        .await?;
                    let mut changes = tools.state_changes();
                    loop {
                        let seen = tools
                            .run(|tx| {
                                Ok(json!(
                                    tx.get::<bool>(StateScope::Session, "flag", "flag")?
                                        .unwrap_or(false)
                                ))
                            })
                            .await?;
                        if seen == json!(true) {
                            return Ok(json!("flag seen"));
                        }
                        tokio::select! {
                            () = ctx.newer_input().raised() => return Ok(json!("yielded")),
                            changed = changes.changed() => changed?,
                        }
                    }
                }
            },
        )
        .with_replay(self.replay);
        Contribution {
            prompt_section: Some(sender),
            tools: Module::new(ModulePath::new("waiter").unwrap(), "Waits.")
                .with_operation(wait)
                .ok(),
            ..Contribution::default()
        }
    }
}

async fn open(path: &Path, model: Arc<ScriptedModel>, replay: Replay, grants: Grants) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        harness::config(model),
    )
    .extension(Waiter::new(replay), grants)
    .open()
    .await
    .unwrap()
}

fn projection(snapshot: &SessionSnapshot) -> Value {
    match snapshot.extensions.get(&id()) {
        Some(ExtensionSlotV0::Running { value }) => value.clone(),
        other => panic!("expected a running slot, got {other:?}"),
    }
}

/// Waits until the waiter's tool has started (its attempt is committed).
async fn until_waiting(session: &impl SessionApi, attempts: usize) {
    for _ in 0..500 {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        let seen = projection(&snapshot)["attempts"]
            .as_array()
            .map_or(0, Vec::len);
        if seen >= attempts {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the tool never started waiting");
}

/// Waits for the work's terminal, then reads the Session.
async fn settled(session: &impl SessionApi, command_id: &CommandId) -> SessionSnapshot {
    terminal_of(session, command_id).await;
    session.read(ReadOptions::default()).await.unwrap()
}

fn tool_results(snapshot: &SessionSnapshot) -> Vec<String> {
    snapshot
        .messages
        .iter()
        .filter_map(|entry| match &entry.value {
            Message::ToolResult(result) => Some(
                result
                    .content
                    .iter()
                    .map(|c| match c {
                        message::InputContent::Text(text) => text.text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_waiting_tool_wakes_on_its_state_and_its_result_hook_commits_with_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call("waiter__wait", json!({})),
        Turn::text("Done."),
    ])));
    let agent = open(
        &dir.path().join("agent.db"),
        model,
        Replay::Unsafe,
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let accepted = session
        .send(PromptText::new("wait").unwrap(), SendOptions::default())
        .await
        .unwrap();
    until_waiting(&session, 1).await;
    session
        .call_extension(&id(), "set", json!({}))
        .await
        .unwrap();
    let snapshot = settled(&session, &accepted.command_id).await;
    assert_eq!(tool_results(&snapshot), vec!["flag seen".to_owned()]);
    let results = projection(&snapshot)["results"].clone();
    let call = snapshot
        .messages
        .iter()
        .find_map(|entry| match &entry.value {
            Message::ToolResult(result) => Some(result.tool_call_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        results,
        json!([{
            "executionId": format!("{}:{}", accepted.command_id, call),
            "tool": "waiter__wait",
            "isError": false,
        }]),
        "the hook saw the committed result of exactly this call"
    );
}

#[tokio::test]
async fn a_steer_raises_newer_input_for_a_waiting_tool() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call("waiter__wait", json!({})),
        Turn::text("Heard you."),
    ])));
    let agent = open(
        &dir.path().join("agent.db"),
        model.clone(),
        Replay::Unsafe,
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let accepted = session
        .send(PromptText::new("wait").unwrap(), SendOptions::default())
        .await
        .unwrap();
    until_waiting(&session, 1).await;
    session
        .send(
            PromptText::new("change of plan").unwrap(),
            SendOptions {
                delivery: Some(PromptDelivery::Steer),
                request_id: None,
            },
        )
        .await
        .unwrap();
    let snapshot = settled(&session, &accepted.command_id).await;
    assert_eq!(tool_results(&snapshot), vec!["yielded".to_owned()]);
    let last_context = model.requests().last().cloned().unwrap();
    let steer_seen = last_context.messages.iter().any(|message| {
        matches!(message, Message::User(user) if format!("{:?}", user.content).contains("change of plan"))
    });
    assert!(steer_seen, "the steer reached the next model call");
}

#[tokio::test]
async fn an_extension_tool_marked_replay_safe_runs_again_after_a_restart() {
    for (replay, expected) in [
        (Replay::Safe, "flag seen"),
        (Replay::Unsafe, "outcome unknown"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::tool_call(
            "waiter__wait",
            json!({}),
        )])));
        let agent = open(&path, model, replay, Grants::all()).await;
        let session_id = agent
            .create_session(RequestId::new("replay").unwrap())
            .await
            .unwrap();
        let session = agent.session(session_id.clone());
        let accepted = session
            .send(PromptText::new("wait").unwrap(), SendOptions::default())
            .await
            .unwrap();
        until_waiting(&session, 1).await;
        agent.close().await.unwrap();

        // The flag is set before the tool can run again: a replay sees it at once.
        let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("After.")])));
        let agent = open(&path, model, replay, Grants::all()).await;
        let session = agent.session(session_id);
        session
            .call_extension(&id(), "set", json!({}))
            .await
            .unwrap();
        let snapshot = settled(&session, &accepted.command_id).await;
        let results = tool_results(&snapshot);
        assert_eq!(results.len(), 1, "{results:?}");
        assert!(
            results[0].starts_with(expected),
            "{replay:?}: {}",
            results[0]
        );
        let attempts = projection(&snapshot)["attempts"].clone();
        let runs = if replay == Replay::Safe { 2 } else { 1 };
        assert_eq!(attempts.as_array().unwrap().len(), runs, "{attempts}");
        assert_eq!(
            attempts[0],
            attempts[runs - 1],
            "a replay sees the execution id of the call it repeats"
        );
        agent.close().await.unwrap();
    }
}

#[tokio::test]
async fn send_from_records_the_sender_for_runs_and_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::text("For the parent."),
        Turn::text("For a person."),
    ])));
    let agent = open(
        &dir.path().join("agent.db"),
        model.clone(),
        Replay::Unsafe,
        Grants::all(),
    )
    .await;
    let session_id = agent
        .create_session(RequestId::new("child").unwrap())
        .await
        .unwrap();
    let session = agent.session(session_id);
    let parent = SessionId::new("parent-session").unwrap();
    let sender = Sender {
        agent: "Parent".into(),
        session_id: parent.clone(),
    };
    let options = SendOptions {
        delivery: None,
        request_id: Some(RequestId::new("from-parent").unwrap()),
    };
    let first = session
        .send_from(
            sender.clone(),
            PromptText::new("do this").unwrap(),
            options.clone(),
        )
        .await
        .unwrap();
    let retried = session
        .send_from(sender, PromptText::new("do this").unwrap(), options)
        .await
        .unwrap();
    assert_eq!(
        first, retried,
        "an exact retry answers the first acceptance"
    );
    settled(&session, &first.command_id).await;
    let second = session
        .send(PromptText::new("and this").unwrap(), SendOptions::default())
        .await
        .unwrap();
    let snapshot = settled(&session, &second.command_id).await;
    assert_eq!(projection(&snapshot)["senders"], json!(["Parent", null]));
    let prompts: Vec<String> = model
        .requests()
        .iter()
        .map(|context| context.system_prompt.clone())
        .collect();
    assert!(prompts[0].contains("Sent by Parent from parent-session."));
    assert!(prompts[1].contains("Sent by a person."));
}

#[tokio::test]
async fn host_transactions_need_no_commands_grant_and_a_read_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let grants = Grants::all().without(Grant::Commands);
    let agent = open(&dir.path().join("agent.db"), model, Replay::Unsafe, grants).await;
    let session = new_session(&agent).await;
    let refused = session.call_extension(&id(), "read", json!({})).await;
    assert_eq!(refused.unwrap_err().code, ErrorCode::NotGranted);

    let before = session.read(ReadOptions::default()).await.unwrap().cursor;
    let read = session
        .host_transaction(&id(), |tx| {
            Ok(json!(tx.get::<bool>(
                StateScope::Session,
                "flag",
                "flag"
            )?))
        })
        .await
        .unwrap();
    assert_eq!(read, Value::Null);
    let after_read = session.read(ReadOptions::default()).await.unwrap().cursor;
    assert_eq!(before, after_read, "a read commits nothing");

    session
        .host_transaction(&id(), |tx| {
            tx.put(StateScope::Session, "flag", "flag", &true)?;
            Ok(Value::Null)
        })
        .await
        .unwrap();
    let after_write = session.read(ReadOptions::default()).await.unwrap();
    assert_ne!(before, after_write.cursor, "a write commits");
    let invalid = session
        .host_transaction(&id(), |_tx| Err(HookError::Invalid("no".into())))
        .await;
    assert_eq!(invalid.unwrap_err().code, ErrorCode::Invalid);
}
