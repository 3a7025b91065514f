//! The kit on a small counter extension: one tool call and its committed result, the
//! projection read and awaited, a timer on the paused clock, and a restart on the file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Due, Extension, ExtensionDefinition, FiredTimer, Grants, HookError, RunContext,
    StateScope, StateView, Tx,
};
use shiitake_ext_testkit::*;
use shiitake_protocol::extension::ExtensionContract;
use shiitake_protocol::{AgentApi, ExtensionId, SessionApi, TerminalOutcome};

struct Counter(ExtensionDefinition);

impl Counter {
    fn new() -> Self {
        Self(ExtensionDefinition {
            id: ExtensionId::new(CounterContract::EXTENSION_ID).unwrap(),
            namespace: "counter".into(),
            scopes: vec![StateScope::Session],
            schema_version: 1,
            migrations: Vec::new(),
            configuration: json!({}),
        })
    }
}

fn add(tx: &mut Tx<'_>) -> Result<i64, HookError> {
    let count = tx
        .get::<i64>(StateScope::Session, "counter", "count")?
        .unwrap_or(0)
        + 1;
    tx.put(StateScope::Session, "counter", "count", &count)?;
    Ok(count)
}

impl Extension for Counter {
    fn definition(&self) -> &ExtensionDefinition {
        &self.0
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "tick_in" => {
                let ms = input["ms"].as_u64().unwrap_or(0);
                tx.set_timer(Due::After(Duration::from_millis(ms)), Value::Null)?;
                Ok(Value::Null)
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_timer(&self, tx: &mut Tx<'_>, _timer: &FiredTimer) -> Result<(), HookError> {
        add(tx).map(|_| ())
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let count: i64 = state
            .get(StateScope::Session, "counter", "count")
            .unwrap_or(0);
        Some(json!({ "count": count }))
    }

    fn contribute(&self, _run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let increment = Operation::from_fn(
            OperationName::new("increment").unwrap(),
            "Adds one to the counter.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move { tools.run(|tx| Ok(json!(add(tx)?))).await }
            },
        )
        .with_replay(Replay::Unsafe);
        Contribution {
            prompt_section: None,
            tools: Module::new(ModulePath::new("counter").unwrap(), "The counter.")
                .with_operation(increment)
                .ok(),
            ..Contribution::default()
        }
    }
}

#[derive(Deserialize, Debug, PartialEq)]
struct Count {
    count: i64,
}

shiitake_protocol::extension_contract! {
    CounterContract = "kit-counter", projection Count
}

#[tokio::test]
async fn one_tool_call_commits_its_result_and_the_projection_shows_it() {
    let kit = TestAgent::builder()
        .turns(call_tool("counter__increment", json!({})))
        .extension(Counter::new(), Grants::all())
        .open()
        .await;
    let session = kit.session().await;
    let outcome = run(&session, "count").await;
    assert_eq!(outcome.terminal.outcome, TerminalOutcome::Completed);
    assert_eq!(outcome.tool_results, vec![ToolOutput::Ok(json!(1))]);
    assert_eq!(outcome.reply.as_deref(), Some("done"));
    assert_eq!(tool_names(&kit.model, 0), ["counter__increment"]);
    assert_eq!(
        projection::read::<CounterContract>(&session).await,
        Some(Count { count: 1 })
    );
    kit.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_timer_fires_when_the_paused_clock_reaches_it() {
    let clock = paused_clock();
    let kit = TestAgent::builder()
        .clock(clock.clone())
        .extension(Counter::new(), Grants::all())
        .open()
        .await;
    let session = kit.session().await;
    let id = ExtensionId::new(CounterContract::EXTENSION_ID).unwrap();
    session
        .call_extension(&id, "tick_in", json!({"ms": 7 * 24 * 3_600_000u64}))
        .await
        .unwrap();
    assert_eq!(
        timers_of(kit.path(), CounterContract::EXTENSION_ID).await,
        1
    );
    clock.advance(Duration::from_secs(7 * 24 * 3_600));
    let count = projection::until::<CounterContract>(&session, |p| p.count == 1).await;
    assert_eq!(count, Count { count: 1 });
    assert_eq!(
        timers_of(kit.path(), CounterContract::EXTENSION_ID).await,
        0
    );
    kit.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_second_agent_on_the_same_file_sees_the_state() {
    let mut first = TestAgent::builder()
        .turns(call_tool("counter__increment", json!({})))
        .extension(Counter::new(), Grants::all())
        .open()
        .await;
    let dir = first.take_dir().unwrap();
    let session_id = first.session().await.session_id().clone();
    run(&first.agent.session(session_id.clone()), "count").await;
    first.agent.close().await.unwrap();

    let second = TestAgent::builder()
        .file(first.path())
        .extension(Counter::new(), Grants::all())
        .open()
        .await;
    let session = second.agent.session(session_id);
    assert_eq!(
        projection::read::<CounterContract>(&session).await,
        Some(Count { count: 1 })
    );
    second.agent.close().await.unwrap();
    drop(dir);
}
