//! The smallest complete extension: a counter with a human command, a model
//! tool, a timer and a projection. `docs/extensions.md` walks through it.
//!
//! Run it with `cargo run -p shiitake-core --example counter_extension`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_capabilities::{Catalog, Module, ModulePath, Operation, OperationName, Replay};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Due, Extension, ExtensionDefinition, FiredTimer, Grant, Grants, HookError,
    RunContext, StateScope, StateView, Tx,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{
    AgentApi, ExtensionId, PromptText, ReadOptions, RequestId, SendOptions, SessionApi,
    SessionFrame,
};
use shiitake_store_sqlite::{Durability, SqliteStore};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The counter: one number per Session.
struct Counter {
    definition: ExtensionDefinition,
    tool_module: ModulePath,
    tool_name: OperationName,
}

impl Counter {
    fn new() -> Result<Self, Failure> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new("example-counter")?,
                namespace: "counter".into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            tool_module: ModulePath::new("counter")?,
            tool_name: OperationName::new("increment")?,
        })
    }
}

/// Adds `by` to the Session's count inside the transaction; returns the new count.
fn add(tx: &mut Tx<'_>, by: i64) -> Result<i64, HookError> {
    let count = tx
        .get::<i64>(StateScope::Session, "counter", "count")?
        .unwrap_or(0)
        + by;
    tx.put(StateScope::Session, "counter", "count", &count)?;
    Ok(count)
}

impl Extension for Counter {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// Human commands: `add {by}` and `tick_in {ms}` (a timer that adds one).
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "add" => {
                let by = input["by"]
                    .as_i64()
                    .ok_or_else(|| HookError::Invalid("`by` is a number".into()))?;
                Ok(json!(add(tx, by)?))
            }
            "tick_in" => {
                let ms = input["ms"].as_u64().unwrap_or(100);
                let id = tx.set_timer(Due::After(Duration::from_millis(ms)), json!({}))?;
                Ok(json!(id.as_str()))
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    /// A timer came due: add one, in the transaction that claims the timer.
    fn on_timer(&self, tx: &mut Tx<'_>, _timer: &FiredTimer) -> Result<(), HookError> {
        add(tx, 1).map(|_| ())
    }

    /// What clients see: `{"count": n}`.
    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let count: i64 = state
            .get(StateScope::Session, "counter", "count")
            .unwrap_or(0);
        Some(json!({ "count": count }))
    }

    /// Each run gets the count as quiet context and a `counter.increment` tool.
    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let count: i64 = run
            .state
            .get(StateScope::Session, "counter", "count")
            .unwrap_or(0);
        let increment = Operation::from_fn(
            self.tool_name.clone(),
            "Adds one to the counter.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move { tools.run(|tx| Ok(json!(add(tx, 1)?))).await }
            },
        )
        .with_replay(Replay::Unsafe);
        let module = Module::new(self.tool_module.clone(), "The counter.")
            .with_operation(increment)
            .ok();
        Contribution {
            prompt_section: Some(format!("The counter is at {count}.")),
            tools: module,
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Full).await?;
    // The scripted model calls the counter's tool once, then answers.
    let script = Script::new(vec![
        Turn::tool_call("counter__increment", json!({})),
        Turn::text("Done."),
    ]);
    let config = AgentConfig::new(Arc::new(FixedModel(Arc::new(ScriptedModel::new(script)))));
    let grants = Grants::none()
        .with(Grant::State)
        .with(Grant::Commands)
        .with(Grant::Timers)
        .with(Grant::Projection)
        .with(Grant::Prompt)
        .with(Grant::Tools);
    let agent = Agent::builder(Arc::new(store), Arc::new(Catalog::new()), config)
        .extension(Counter::new()?, grants)
        .open()
        .await?;

    let session = agent.session(
        agent
            .create_session(RequestId::new("counter-demo")?)
            .await?,
    );
    let counter = ExtensionId::new("example-counter")?;
    let watch = session.watch(ReadOptions::default()).await?;

    // A human command, idempotent by request id.
    let answer = session
        .call_extension(&counter, "add", json!({"by": 2, "requestId": "h-1"}))
        .await?;
    println!("add 2 -> {answer}");
    // The model calls the tool.
    session
        .send(
            PromptText::new("Please increment the counter.")?,
            SendOptions::default(),
        )
        .await?;
    // A timer adds one more.
    session
        .call_extension(&counter, "tick_in", json!({"ms": 100}))
        .await?;

    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        if let SessionFrame::Update(update) = frame? {
            let value = update.extensions.get(&counter).cloned();
            println!("slot: {}", serde_json::to_string(&value)?);
            if let Some(shiitake_protocol::ExtensionSlotV0::Running { value }) = value
                && value["count"] == json!(4)
            {
                break;
            }
        }
    }
    agent.close().await?;
    Ok(())
}
