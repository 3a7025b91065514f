//! Goal's fixture on the extension test kit: the Agent with the goal extension on a
//! paused clock, the conformance test tools and a gate tool the test opens, the goal's
//! projection, commands and chat lines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, SourceId, StaticSource,
};
use shiitake_core::clock::ManualClock;
use shiitake_core::store::Store;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_goal::contract::{
    Goal, GoalChange, GoalContract, GoalProjection, PauseGoal, SetGoal,
};
use shiitake_ext_testkit::{TestAgent, fast_retry, paused_clock, projection};
use shiitake_model::{ScriptedModel, Turn};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::*;
use shiitake_store_sqlite::SqliteStore;
use tokio::sync::Semaphore;

pub use shiitake_ext_testkit::{
    START, inbox_state, system_prompts, tool_texts as tool_results, until_idle,
};

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

/// The configuration of Agents built without the kit: two model attempts, `clock`.
pub fn config(model: Arc<ScriptedModel>, clock: Arc<ManualClock>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = fast_retry(2);
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
    let kit = TestAgent::builder()
        .file(path)
        .model(model)
        .clock(clock)
        .configure(|config| config.retry = fast_retry(2))
        .configure(tune)
        .tools(tools(gate).await)
        .kit_extension(shiitake_ext_goal::extension().unwrap())
        .open()
        .await;
    (kit.agent, kit.store)
}

pub async fn setup(turns: Vec<Turn>) -> Setup {
    setup_with(turns, |_| {}).await
}

pub async fn setup_with(turns: Vec<Turn>, tune: impl FnOnce(&mut AgentConfig)) -> Setup {
    setup_of(turns, tune, shiitake_ext_goal::extension().unwrap()).await
}

/// The fixture with goals bounded by `bounds` instead of the defaults.
pub async fn setup_bounded(turns: Vec<Turn>, bounds: shiitake_ext_goal::GoalBounds) -> Setup {
    setup_of(
        turns,
        |_| {},
        shiitake_ext_goal::extension_with(bounds).unwrap(),
    )
    .await
}

async fn setup_of(
    turns: Vec<Turn>,
    tune: impl FnOnce(&mut AgentConfig),
    extension: shiitake_core::extension::kit::KitExtension<
        shiitake_ext_goal::contract::GoalContract,
        shiitake_ext_goal::GoalRun,
    >,
) -> Setup {
    let clock = paused_clock();
    let gate = Gate::new();
    let mut kit = TestAgent::builder()
        .turns(turns)
        .clock(clock.clone())
        .configure(|config| config.retry = fast_retry(2))
        .configure(tune)
        .tools(tools(&gate).await)
        .kit_extension(extension)
        .open()
        .await;
    Setup {
        dir: kit.take_dir().unwrap(),
        agent: kit.agent,
        store: kit.store,
        model: kit.model,
        clock,
        gate,
    }
}

/// The decoded projection of an observation's slots.
pub fn decode(slots: &SessionExtensionSlots) -> Option<GoalProjection> {
    match projection::slot::<GoalContract>(slots) {
        shiitake_protocol::extension::ExtensionViewV0::Running { value } => {
            Some(value.unwrap_or_default())
        }
        _ => None,
    }
}

pub async fn projection(session: &impl SessionApi) -> GoalProjection {
    projection::read::<GoalContract>(session)
        .await
        .unwrap_or_default()
}

/// Waits until the projection satisfies `wanted` and returns it.
pub async fn until(
    session: &impl SessionApi,
    wanted: impl Fn(&GoalProjection) -> bool,
) -> GoalProjection {
    projection::until::<GoalContract>(session, wanted).await
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

/// A turn that calls a tool with `{}` arguments.
pub fn call(tool: &str) -> Turn {
    Turn::tool_call(tool, json!({}))
}
