//! The way to write an extension: a counter with one command, one tool and one timer,
//! declared to core's kit and tested with the test kit (`docs/extensions.md` walks
//! through it). Its tests: `tests/example.rs`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension, Tool};
use shiitake_core::extension::{Due, HookError, StateScope, StateView, Tx};
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::{contract_commands, extension_contract};

// The contract: what clients compile against (in a crate, `contract.rs`, built without core).

extension_contract! {
    /// The counter's identity and what it publishes per Session.
    pub CounterContract = "example-counter", projection CounterView
}

/// The projection: the Session's count.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterView {
    /// The Session's count.
    pub count: i64,
}

/// `add`: a person adds `by` now, or in `inMs` milliseconds on a durable timer; a retry
/// with the same `requestId` adds nothing. Answers the count.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    by: i64,
    #[serde(default)]
    in_ms: Option<u64>,
    #[serde(default)]
    request_id: Option<String>,
}

contract_commands!(CounterContract { Add => "add" in SessionScope -> i64 });

/// The input of the model tool `counter.increment`; its schema is derived from it.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Increment {
    /// How much to add, 1 to 100.
    #[schemars(range(min = 1, max = 100))]
    by: i64,
}

// The extension: rules as plain functions, declared to the kit once each.

fn count(state: &StateView<'_>) -> i64 {
    state
        .get(StateScope::Session, "counter", "count")
        .unwrap_or(0)
}

fn add(tx: &mut Tx<'_>, by: i64) -> Result<i64, HookError> {
    let count = tx
        .get::<i64>(StateScope::Session, "counter", "count")?
        .unwrap_or(0)
        + by;
    tx.put(StateScope::Session, "counter", "count", &count)?;
    Ok(count)
}

/// The counter extension; register it with `AgentBuilder::kit_extension`.
pub fn extension() -> Result<KitExtension<CounterContract>, KitError> {
    let increment = Tool::new(
        "increment",
        "Adds to the counter.",
        |tx, input: Increment, _| add(tx, input.by).map(Value::from),
    )?;
    ExtensionKit::<CounterContract>::new("counter")?
        .session_state()
        .command(|tx, input: Add| match input.in_ms {
            None => add(tx, input.by),
            Some(ms) => {
                tx.set_timer(Due::After(Duration::from_millis(ms)), json!(input.by))?;
                tx.get(StateScope::Session, "counter", "count")
                    .map(Option::unwrap_or_default)
            }
        })
        .on_timer(|tx, timer| add(tx, timer.payload.as_i64().unwrap_or(0)).map(drop))
        .tool(increment)
        .tools_description("The counter.")
        .prompt(|run| Some(format!("The counter is at {}.", count(&run.state))))
        .projection(|state| {
            Some(CounterView {
                count: count(state),
            })
        })
        .footer(|state, id| {
            let text = format!("counted {}", count(state));
            vec![FooterRowV0::new(id.clone(), "count", "counter", text)]
        })
        .build()
}

/// Prints what the kit derived: the grants and the tool's input schema.
fn main() -> Result<(), KitError> {
    let counter = extension()?;
    println!("grants: {:?}", counter.grants());
    counter
        .tool_schemas()
        .for_each(|(name, schema)| println!("counter.{name}: {schema}"));
    Ok(())
}
