//! A real Agent (SQLite in a temp dir, the scripted model, a paused clock) with the
//! goal extension, the conformance test tools and a gate tool the test opens.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, SourceId, StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_core::store::Store;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_goal::contract::{
    Goal, GoalChange, GoalContract, GoalProjection, PauseGoal, SetGoal,
};
use shiitake_ext_goal::{GoalExtension, goal_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension, view};
use shiitake_protocol::message::{InputContent, Message, UserContent};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};
use tokio::sync::Semaphore;

/// 2025-11-30T00:00:00Z, where paused clocks start.
pub const START: u64 = 1_764_460_800_000;

/// A tool (`gate__wait`) that waits until the test adds a permit.
#[derive(Clone)]
pub struct Gate(pub Arc<Semaphore>);

impl Gate {
    pub fn new() -> Self {
        Self(Arc::new(Semaphore::new(0)))
    }

    /// Lets one waiting (or the next) call through.
    pub fn open_once(&self) {
        self.0.add_permits(1);
    }
}

/// The conformance tools (`test__echo`, `test__slow`) and the gate.
pub async fn tools(gate: &Gate) -> Arc<Catalog> {
    let catalog = shiitake_conformance::tools::catalog(Arc::default()).await;
    let semaphore = gate.0.clone();
    let wait = Operation::from_fn(
        OperationName::new("wait").unwrap(),
        "Waits until the test opens the gate.",
        move |_input, ctx| {
            let semaphore = semaphore.clone();
            async move {
                tokio::select! {
                    permit = semaphore.acquire() => {
                        permit.map_err(|e| shiitake_capabilities::ToolError::fatal(e.to_string()))?.forget();
                        Ok(json!("through the gate"))
                    }
                    () = ctx.cancellation().cancelled() => Ok(json!("cancelled")),
                }
            }
        },
    );
    let module = Module::new(ModulePath::new("gate").unwrap(), "The test's gate.")
        .with_operation(wait)
        .unwrap();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("gate"),
            vec![module],
        )))
        .await
        .unwrap();
    catalog
}

pub struct Setup {
    pub agent: Agent,
    pub store: Arc<SqliteStore>,
    pub model: Arc<ScriptedModel>,
    pub clock: Arc<ManualClock>,
    pub gate: Gate,
    pub dir: tempfile::TempDir,
}

pub fn config(model: Arc<ScriptedModel>, clock: Arc<ManualClock>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 2,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    };
    config.clock = clock;
    config
}

pub async fn open_at(
    path: &Path,
    model: Arc<ScriptedModel>,
    clock: Arc<ManualClock>,
    gate: &Gate,
    tune: impl FnOnce(&mut AgentConfig),
) -> (Agent, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(path, Durability::Normal).await.unwrap());
    let mut config = config(model, clock);
    tune(&mut config);
    let agent = Agent::builder(store.clone(), tools(gate).await, config)
        .extension(GoalExtension::new().unwrap(), goal_grants())
        .open()
        .await
        .unwrap();
    (agent, store)
}

pub async fn setup(turns: Vec<Turn>) -> Setup {
    setup_with(turns, |_| {}).await
}

pub async fn setup_with(turns: Vec<Turn>, tune: impl FnOnce(&mut AgentConfig)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let clock = ManualClock::new(START);
    let gate = Gate::new();
    let (agent, store) = open_at(
        &dir.path().join("agent.db"),
        model.clone(),
        clock.clone(),
        &gate,
        tune,
    )
    .await;
    Setup {
        agent,
        store,
        model,
        clock,
        gate,
        dir,
    }
}

/// The decoded projection of an observation's slots.
pub fn decode(slots: &SessionExtensionSlots) -> Option<GoalProjection> {
    match view::<GoalContract>(slots) {
        Ok(ExtensionViewV0::Running { value }) => Some(value.unwrap_or_default()),
        _ => None,
    }
}

pub async fn projection(session: &impl SessionApi) -> GoalProjection {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    decode(&snapshot.extensions).expect("the goal extension is running")
}

/// Waits until the projection satisfies `wanted` and returns it.
pub async fn until(
    session: &impl SessionApi,
    wanted: impl Fn(&GoalProjection) -> bool,
) -> GoalProjection {
    let check = |slots: &SessionExtensionSlots| decode(slots).filter(|p| wanted(p));
    wait_for(
        session,
        |snapshot| check(&snapshot.extensions),
        |frame| match frame {
            SessionFrame::Update(update) => check(&update.extensions),
            _ => None,
        },
    )
    .await
}

/// Waits until no work runs or waits in the Session.
pub async fn until_idle(session: &impl SessionApi) {
    let idle = |activity: &SessionActivity, pending: &SessionPendingPrompts| {
        matches!(activity.queue, QueueState::Idle) && pending.prompts.is_empty()
    };
    wait_for(
        session,
        |snapshot| idle(&snapshot.activity, &snapshot.pending).then_some(()),
        |frame| match frame {
            SessionFrame::Update(update) => idle(&update.activity, &update.pending).then_some(()),
            _ => None,
        },
    )
    .await;
}

pub async fn set_goal(session: &impl SessionApi, objective: &str) -> Goal {
    bind_session_extension::<_, GoalContract>(session)
        .call(&SetGoal {
            objective: objective.into(),
            replace_revision: None,
            request_id: None,
        })
        .await
        .unwrap()
}

pub async fn pause_goal(session: &impl SessionApi) -> Goal {
    bind_session_extension::<_, GoalContract>(session)
        .call(&PauseGoal(GoalChange::default()))
        .await
        .unwrap()
}

/// The attention raised on a Session: (kind, inbox, text).
pub async fn attention(store: &SqliteStore, session_id: &SessionId) -> Vec<(String, bool, String)> {
    store
        .attention(session_id)
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.kind, row.inbox, row.text))
        .collect()
}

/// The inbox state of one Session.
pub async fn inbox_state(agent: &Agent, session_id: &SessionId) -> SessionInboxState {
    let page = agent.list_sessions(None).await.unwrap();
    page.sessions
        .into_iter()
        .find_map(|row| match row {
            SessionSummaryRow::Available {
                session_id: id,
                summary,
            } if &id == session_id => Some(summary.state),
            _ => None,
        })
        .unwrap()
}

/// The text of every tool result, oldest first.
pub fn tool_results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(
                result
                    .content
                    .iter()
                    .map(|c| match c {
                        InputContent::Text(text) => text.text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The goal's chat lines: user messages marked with the extension, oldest first.
pub fn goal_lines(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::User(user)
                if user.extra.get("author") == Some(&Value::from("extension"))
                    && user.extra.get("extensionId")
                        == Some(&Value::from(shiitake_ext_goal::contract::EXTENSION_ID)) =>
            {
                match &user.content {
                    UserContent::Text(text) => Some(text.clone()),
                    UserContent::Blocks(_) => Some("[blocks]".into()),
                }
            }
            _ => None,
        })
        .collect()
}

/// The system prompt of every model request, oldest first.
pub fn system_prompts(model: &ScriptedModel) -> Vec<String> {
    model
        .requests()
        .into_iter()
        .map(|request| request.system_prompt)
        .collect()
}

/// A turn that calls a tool with `{}` arguments.
pub fn call(tool: &str) -> Turn {
    Turn::tool_call(tool, json!({}))
}
