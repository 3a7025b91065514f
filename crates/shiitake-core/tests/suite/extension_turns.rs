//! What an extension learns about its own work and how it leaves a note in the
//! transcript: settled hooks count the run's tool calls and the tokens its model
//! reported (also across a restart),
//! `Tx::admit` answers the command id of the admitted prompt, and `Tx::append_line`
//! adds a chat line marked with the extension, now or after the running work.

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
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, Settled,
    StateScope, StateView, Tx,
};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

const ID: &str = "test-recorder";

/// Records settled runs and admitted ids; its `gate` tool waits for the `open` row.
struct Recorder {
    definition: ExtensionDefinition,
}

impl Recorder {
    fn new() -> Self {
        Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(ID).unwrap(),
                namespace: "recorder".into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
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

impl Extension for Recorder {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        let text = input["text"].as_str().unwrap_or("note").to_owned();
        match command {
            "admit" => {
                let command_id = tx.admit(&text, PromptDelivery::FollowUp, "mine")?;
                push(tx, "admitted", json!(command_id))?;
                Ok(json!(command_id))
            }
            "line" => {
                tx.append_line(&text)?;
                Ok(Value::Null)
            }
            "open" => {
                tx.put(StateScope::Session, "gate", "open", &true)?;
                Ok(Value::Null)
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        push(
            tx,
            "tokens",
            json!({"commandId": settled.command_id, "tokens": settled.tokens}),
        )?;
        push(
            tx,
            "settled",
            json!({
                "commandId": settled.command_id,
                "outcome": settled.outcome,
                "toolCalls": settled.tool_calls,
            }),
        )
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        Some(json!({
            "settled": state.get::<Value>(StateScope::Session, "settled", "all"),
            "admitted": state.get::<Value>(StateScope::Session, "admitted", "all"),
            "tokens": state.get::<Value>(StateScope::Session, "tokens", "all"),
            "waiting": state.get::<bool>(StateScope::Session, "gate", "waiting"),
        }))
    }

    fn contribute(&self, _run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let note = Operation::from_fn(
            OperationName::new("note").unwrap(),
            "Does nothing.",
            |_input, _ctx| async { Ok(json!("noted")) },
        );
        let gate = Operation::from_fn(
            OperationName::new("gate").unwrap(),
            "Waits until the gate is open.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move {
                    let mut changes = tools.state_changes();
                    tools
                        .run(|tx| {
                            tx.put(StateScope::Session, "gate", "waiting", &true)?;
                            Ok(Value::Null)
                        })
                        .await?;
                    loop {
                        let open = tools
                            .run(|tx| {
                                Ok(json!(
                                    tx.get::<bool>(StateScope::Session, "gate", "open")?
                                        .unwrap_or(false)
                                ))
                            })
                            .await?;
                        if open == json!(true) {
                            return Ok(json!("passed"));
                        }
                        changes.changed().await?;
                    }
                }
            },
        )
        .with_replay(Replay::Safe);
        let module = Module::new(ModulePath::new("recorder").unwrap(), "Recorder tools.")
            .with_operation(note)
            .and_then(|module| module.with_operation(gate))
            .ok();
        Contribution {
            prompt_section: None,
            tools: module,
            ..Contribution::default()
        }
    }
}

async fn open(path: &Path, turns: Vec<Turn>, grants: Grants) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        harness::config(model),
    )
    .extension(Recorder::new(), grants)
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

async fn read(session: &impl SessionApi) -> SessionSnapshot {
    session.read(ReadOptions::default()).await.unwrap()
}

/// Waits until the gate tool has started waiting.
async fn until_gated(session: &impl SessionApi) {
    for _ in 0..500 {
        if projection(&read(session).await)["waiting"] == json!(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the gate tool never started");
}

/// `(text, author, extensionId)` of every user message, oldest first.
fn user_lines(snapshot: &SessionSnapshot) -> Vec<(String, Option<String>, Option<String>)> {
    snapshot
        .messages
        .iter()
        .filter_map(|entry| match &entry.value {
            Message::User(user) => {
                let text = match &user.content {
                    UserContent::Text(text) => text.clone(),
                    UserContent::Blocks(_) => "[blocks]".into(),
                };
                let field = |name: &str| {
                    user.extra
                        .get(name)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                Some((text, field("author"), field("extensionId")))
            }
            _ => None,
        })
        .collect()
}

fn line(text: &str) -> (String, Option<String>, Option<String>) {
    (text.into(), Some("extension".into()), Some(ID.into()))
}

fn prompt(text: &str) -> (String, Option<String>, Option<String>) {
    (text.into(), None, None)
}

#[tokio::test]
async fn settled_hooks_count_the_tool_calls_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::new(vec![
            Step::tool_call("recorder__note", json!({})),
            Step::tool_call("recorder__note", json!({})),
        ]),
        Turn::tool_call("recorder__note", json!({})),
        Turn::text("worked"),
        Turn::text("only talked"),
    ];
    let agent = open(&dir.path().join("agent.db"), turns, Grants::all()).await;
    let session = new_session(&agent).await;
    let worked = send(&session, "work").await;
    terminal_of(&session, &worked).await;
    let talked = send(&session, "talk").await;
    terminal_of(&session, &talked).await;
    assert_eq!(
        projection(&read(&session).await)["settled"],
        json!([
            {"commandId": worked, "outcome": "completed", "toolCalls": 3},
            {"commandId": talked, "outcome": "completed", "toolCalls": 0},
        ])
    );
    agent.close().await.unwrap();
}

/// Restarts the Agent at `path` while `work` waits at the gate; the resumed run
/// replays the gate (replay-safe) once it is opened, then only talks, and settles.
async fn restart_at_the_gate(
    path: &Path,
    agent: Agent,
    session_id: SessionId,
    work: &CommandId,
) -> (Agent, shiitake_core::LocalSession) {
    until_gated(&agent.session(session_id.clone())).await;
    agent.close().await.unwrap();
    let agent = open(path, vec![Turn::text("through")], Grants::all()).await;
    let session = agent.session(session_id);
    session
        .call_extension(&id(), "open", json!({}))
        .await
        .unwrap();
    terminal_of(&session, work).await;
    (agent, session)
}

#[tokio::test]
async fn tool_calls_made_before_a_restart_still_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let agent = open(
        &path,
        vec![Turn::tool_call("recorder__gate", json!({}))],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let session_id = session.session_id().clone();
    let work = send(&session, "wait at the gate").await;
    let (agent, session) = restart_at_the_gate(&path, agent, session_id, &work).await;
    assert_eq!(
        projection(&read(&session).await)["settled"],
        json!([{"commandId": work, "outcome": "completed", "toolCalls": 1}]),
        "the call made before the restart counts once"
    );
    agent.close().await.unwrap();
}

/// The tokens the committed answers of `command_id` report, as the transcript shows them.
fn reported_tokens(snapshot: &SessionSnapshot, command_id: &CommandId) -> u64 {
    snapshot
        .messages
        .iter()
        .filter(|entry| entry.command_id.as_ref() == Some(command_id))
        .filter_map(|entry| match &entry.value {
            Message::Assistant(answer) => Some(answer.usage.total_tokens),
            _ => None,
        })
        .sum()
}

#[tokio::test]
async fn settled_hooks_sum_the_tokens_the_model_reported_also_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let agent = open(
        &path,
        vec![
            Turn::tool_call("recorder__note", json!({})),
            Turn::text("noted and done"),
            Turn::tool_call("recorder__gate", json!({})),
        ],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let session_id = session.session_id().clone();
    let first = send(&session, "note something").await;
    terminal_of(&session, &first).await;
    let gated = send(&session, "wait at the gate").await;
    // The resumed run's tally starts from the answer committed before the restart.
    let (agent, session) = restart_at_the_gate(&path, agent, session_id, &gated).await;
    let snapshot = read(&session).await;
    let expected: Vec<Value> = [&first, &gated]
        .into_iter()
        .map(|run| json!({"commandId": run, "tokens": reported_tokens(&snapshot, run)}))
        .collect();
    assert_eq!(projection(&snapshot)["tokens"], json!(expected));
    let answers = |run: &CommandId| {
        snapshot
            .messages
            .iter()
            .filter(|entry| {
                entry.command_id.as_ref() == Some(run)
                    && matches!(entry.value, Message::Assistant(_))
            })
            .count()
    };
    assert_eq!((answers(&first), answers(&gated)), (2, 2));
    assert!(
        expected.iter().all(|e| e["tokens"].as_u64() > Some(0)),
        "the scripted model reports usage: {expected:?}"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn admit_answers_the_command_id_the_admitted_prompt_runs_as() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(
        &dir.path().join("agent.db"),
        vec![Turn::text("admitted work done")],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let answered = session
        .call_extension(&id(), "admit", json!({"text": "do the admitted work"}))
        .await
        .unwrap();
    let command_id = CommandId::new(answered.as_str().unwrap()).unwrap();
    terminal_of(&session, &command_id).await;
    let snapshot = read(&session).await;
    assert_eq!(projection(&snapshot)["admitted"], json!([command_id]));
    assert_eq!(
        projection(&snapshot)["settled"][0]["commandId"],
        json!(command_id)
    );
    let own: Vec<_> = snapshot
        .messages
        .iter()
        .map(|m| m.command_id.clone())
        .collect();
    assert_eq!(
        own,
        vec![Some(command_id.clone()), Some(command_id)],
        "the prompt and the answer carry the id admit answered"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_line_enters_at_once_when_idle_and_after_the_running_work_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(
        &dir.path().join("agent.db"),
        vec![
            Turn::tool_call("recorder__gate", json!({})),
            Turn::text("through the gate"),
        ],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    session
        .call_extension(&id(), "line", json!({"text": "before any work"}))
        .await
        .unwrap();
    let snapshot = read(&session).await;
    assert_eq!(user_lines(&snapshot), vec![line("before any work")]);
    assert_eq!(snapshot.messages[0].command_id, None, "a line is not work");

    let work = send(&session, "go through the gate").await;
    until_gated(&session).await;
    session
        .call_extension(&id(), "line", json!({"text": "while working"}))
        .await
        .unwrap();
    assert_eq!(
        user_lines(&read(&session).await),
        vec![line("before any work"), prompt("go through the gate")],
        "the line waits while the work runs"
    );
    session
        .call_extension(&id(), "open", json!({}))
        .await
        .unwrap();
    terminal_of(&session, &work).await;
    let snapshot = read(&session).await;
    assert_eq!(
        outline(
            &snapshot
                .messages
                .iter()
                .map(|m| m.value.clone())
                .collect::<Vec<_>>()
        ),
        vec![
            "user: before any work",
            "user: go through the gate",
            "assistant: -> recorder__gate",
            "tool recorder__gate: passed",
            "user: while working",
            "assistant: through the gate",
        ],
        "it entered at the next model-call boundary"
    );
    assert_eq!(user_lines(&snapshot)[2], line("while working"));
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_waiting_line_survives_a_restart_with_its_mark() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let agent = open(
        &path,
        vec![Turn::tool_call("recorder__gate", json!({}))],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let session_id = session.session_id().clone();
    let work = send(&session, "wait").await;
    until_gated(&session).await;
    session
        .call_extension(&id(), "line", json!({"text": "noted before the restart"}))
        .await
        .unwrap();
    agent.close().await.unwrap();

    let agent = open(&path, vec![Turn::text("resumed")], Grants::all()).await;
    let session = agent.session(session_id);
    session
        .call_extension(&id(), "open", json!({}))
        .await
        .unwrap();
    terminal_of(&session, &work).await;
    assert_eq!(
        user_lines(&read(&session).await),
        vec![prompt("wait"), line("noted before the restart")]
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn lines_need_the_admissions_grant() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(
        &dir.path().join("agent.db"),
        vec![],
        Grants::all().without(Grant::Admissions),
    )
    .await;
    let session = new_session(&agent).await;
    let error = session
        .call_extension(&id(), "line", json!({"text": "not allowed"}))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted);
    assert!(read(&session).await.messages.is_empty());
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_prompt_cancelled_before_it_ran_settles_for_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(
        &dir.path().join("agent.db"),
        vec![
            Turn::tool_call("recorder__gate", json!({})),
            Turn::text("through"),
        ],
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let running = send(&session, "wait at the gate").await;
    until_gated(&session).await;
    let admitted = session
        .call_extension(&id(), "admit", json!({"text": "queued behind"}))
        .await
        .unwrap();
    let queued = CommandId::new(admitted.as_str().unwrap()).unwrap();
    let outcome = session
        .cancel(CancelInput {
            command_id: queued.clone(),
            only_if_pending: Some(true),
        })
        .await
        .unwrap();
    assert!(matches!(outcome, CancelResult::Accepted(_)), "{outcome:?}");
    assert_eq!(
        projection(&read(&session).await)["settled"],
        json!([{"commandId": queued, "outcome": "cancelled", "toolCalls": 0}]),
        "the hook ran in the commit of the cancelled prompt's terminal"
    );
    session
        .call_extension(&id(), "open", json!({}))
        .await
        .unwrap();
    terminal_of(&session, &running).await;
    let settled = projection(&read(&session).await)["settled"].clone();
    assert_eq!(settled.as_array().unwrap().len(), 2, "{settled}");
    assert_eq!(settled[1]["commandId"], json!(running));
    agent.close().await.unwrap();
}
