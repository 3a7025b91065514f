//! The extension kit: typed commands routed by their scope, receipts that mean one
//! effect whichever route carried a request id, tools with derived schemas checked
//! at build, and footer rows bounded by the host.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension, Tool};
use shiitake_core::extension::{Grant, HookError, StateScope, Tx};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionContract, ExtensionViewV0, view};
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0, FooterTone, MAX_FOOTER_ROWS};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

enum Tally {}
impl ExtensionContract for Tally {
    const EXTENSION_ID: &'static str = "test-tally";
    type Projection = TallyView;
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct TallyView {
    session: u64,
    agent: u64,
}

/// Adds to this Session's tally.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Add {
    by: u64,
    #[serde(default)]
    request_id: Option<String>,
}

/// Adds to the Agent's tally.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddAll {
    by: u64,
    #[serde(default)]
    request_id: Option<String>,
}

/// How many footer rows to show.
#[derive(Serialize, Deserialize)]
struct Rows {
    count: usize,
}

contract_commands!(Tally {
    Add => "add" in SessionScope -> u64,
    AddAll => "add_all" in AgentScope -> u64,
    Rows => "rows" in SessionScope -> (),
});

/// The input of `tally.bump`.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Bump {
    /// How much.
    #[schemars(range(min = 1, max = 10))]
    by: u64,
}

fn bump(tx: &mut Tx<'_>, scope: StateScope, by: u64) -> Result<u64, HookError> {
    let total = tx.get::<u64>(scope, "tally", "n")?.unwrap_or(0) + by;
    tx.put(scope, "tally", "n", &total)?;
    Ok(total)
}

fn tally() -> KitExtension<Tally> {
    ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .session_state()
        .agent_state()
        .command(|tx, input: Add| bump(tx, StateScope::Session, input.by))
        .command(|tx, input: AddAll| bump(tx, StateScope::Agent, input.by))
        .command(|tx, input: Rows| tx.put(StateScope::Session, "tally", "rows", &input.count))
        .tool(
            Tool::new("bump", "Adds to the tally.", |tx, input: Bump, _call| {
                bump(tx, StateScope::Session, input.by).map(Value::from)
            })
            .unwrap(),
        )
        .tools_description("The tally.")
        .projection(|state| {
            Some(TallyView {
                session: state.get(StateScope::Session, "tally", "n").unwrap_or(0),
                agent: state.get(StateScope::Agent, "tally", "n").unwrap_or(0),
            })
        })
        .footer(|state, id| {
            let rows: usize = state.get(StateScope::Session, "tally", "rows").unwrap_or(1);
            let count: u64 = state.get(StateScope::Session, "tally", "n").unwrap_or(0);
            let other = ExtensionId::new("someone-else").unwrap();
            (0..rows)
                .map(|i| {
                    // The host files every row under the extension's own id.
                    let owner = if i == 0 { id.clone() } else { other.clone() };
                    FooterRowV0::new(owner, &format!("row{i}"), "tally", format!("tally {count}"))
                        .with_tone(FooterTone::Attention)
                        .with_action(FooterActionV0::command(
                            "add",
                            "Add",
                            "add",
                            json!({"by": 1}),
                        ))
                })
                .collect()
        })
        .build()
        .unwrap()
}

async fn open(path: &std::path::Path, turns: Vec<Turn>, extension: KitExtension<Tally>) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        crate::support::harness::config(model),
    )
    .kit_extension(extension)
    .open()
    .await
    .unwrap()
}

fn id() -> ExtensionId {
    ExtensionId::new(Tally::EXTENSION_ID).unwrap()
}

async fn tallies(session: &impl SessionApi) -> TallyView {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match view::<Tally>(&snapshot.extensions).unwrap() {
        ExtensionViewV0::Running { value: Some(value) } => value,
        other => panic!("expected the tally, got {other:?}"),
    }
}

#[tokio::test]
async fn a_command_on_the_other_scopes_route_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db"), vec![], tally()).await;
    let session = new_session(&agent).await;

    let refused = session
        .call_extension(&id(), "add_all", json!({"by": 5}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused}");
    assert!(refused.message.contains("agent-scope"), "{refused}");
    let refused = agent
        .call_extension(&id(), "add", json!({"by": 5}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused}");
    assert!(refused.message.contains("session-scope"), "{refused}");
    assert_eq!(
        tallies(&session).await,
        TallyView {
            session: 0,
            agent: 0
        }
    );

    // Each on its own route works.
    session
        .call_extension(&id(), "add", json!({"by": 2}))
        .await
        .unwrap();
    agent
        .call_extension(&id(), "add_all", json!({"by": 3}))
        .await
        .unwrap();
    assert_eq!(
        tallies(&session).await,
        TallyView {
            session: 2,
            agent: 3
        }
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn one_request_id_has_one_effect_whichever_route_carries_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db"), vec![], tally()).await;
    let session = new_session(&agent).await;
    let input = json!({"by": 4, "requestId": "once"});

    assert!(
        session
            .call_extension(&id(), "add_all", input.clone())
            .await
            .is_err()
    );
    let first = agent
        .call_extension(&id(), "add_all", input.clone())
        .await
        .unwrap();
    assert!(
        session
            .call_extension(&id(), "add_all", input.clone())
            .await
            .is_err()
    );
    let again = agent.call_extension(&id(), "add_all", input).await.unwrap();
    assert_eq!((first, again), (json!(4), json!(4)));
    assert_eq!(tallies(&session).await.agent, 4, "one effect");
    agent.close().await.unwrap();
}

#[tokio::test]
async fn typed_inputs_are_decoded_and_unknown_commands_named() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db"), vec![], tally()).await;
    let session = new_session(&agent).await;
    let bad = session
        .call_extension(&id(), "add", json!({"by": "three"}))
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::Invalid);
    assert!(bad.message.starts_with("add: "), "{bad}");
    let unknown = session
        .call_extension(&id(), "subtract", json!({}))
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_tool_is_offered_with_its_derived_schema_and_runs_in_a_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::tool_call("tally__bump", json!({"by": 11})),
        Turn::tool_call("tally__bump", json!({"by": 10})),
        Turn::text("done"),
    ];
    let agent = open(&dir.path().join("agent.db"), turns, tally()).await;
    let session = new_session(&agent).await;
    let work = send(&session, "bump it").await;
    terminal_of(&session, &work).await;
    assert_eq!(
        tallies(&session).await.session,
        10,
        "11 is over the schema's maximum"
    );
    let results: Vec<String> = transcript(&session)
        .await
        .into_iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(serde_json::to_string(&result.content).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("maximum"), "{results:?}");
    agent.close().await.unwrap();
}

#[test]
fn a_tool_whose_input_leaves_the_schema_subset_is_refused_at_build() {
    /// A pattern is a keyword the subset does not check.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Either {
        #[schemars(regex(pattern = "^a+$"))]
        word: String,
    }
    let refused = Tool::<()>::new("either", "Either.", |_tx, _input: Either, _call| {
        Ok(Value::Null)
    })
    .err()
    .unwrap();
    assert!(
        matches!(&refused, KitError::Schema { tool, .. } if tool == "either"),
        "{refused}"
    );
}

#[test]
fn the_advertised_schema_keeps_field_docs_and_drops_type_docs_and_integer_formats() {
    /// The input (a doc for Rust readers, not the model).
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Batch {
        /// The items to add.
        items: Vec<Item>,
    }
    /// One item (a type doc).
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        /// How many, at most 9.
        #[schemars(range(max = 9))]
        count: u32,
    }
    let tally = ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .tool(
            Tool::new("batch", "Adds a batch.", |_tx, _input: Batch, _call| {
                Ok(Value::Null)
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let (_, schema) = tally.tool_schemas().next().unwrap();
    assert_eq!(
        schema,
        &json!({
            "type": "object",
            "required": ["items"],
            "properties": {"items": {
                "description": "The items to add.",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["count"],
                    "properties": {"count": {
                        "description": "How many, at most 9.",
                        "type": "integer", "minimum": 0, "maximum": 9
                    }}
                }
            }}
        })
    );
}

#[test]
fn a_command_declared_twice_is_refused_at_build() {
    let refused = ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .command(|_tx, input: Add| Ok(input.by))
        .command(|_tx, input: Add| Ok(input.by + 1))
        .build()
        .err()
        .unwrap();
    assert_eq!(refused, KitError::Duplicate("add".into()));
}

#[test]
fn the_grants_are_what_the_declarations_use() {
    let grants = tally().grants();
    for grant in [
        Grant::State,
        Grant::Commands,
        Grant::Tools,
        Grant::Projection,
    ] {
        assert!(grants.has(grant), "{grant}");
    }
    for grant in [
        Grant::Timers,
        Grant::Admissions,
        Grant::Prompt,
        Grant::Files,
    ] {
        assert!(!grants.has(grant), "{grant}");
    }
}

#[tokio::test]
async fn footer_rows_ride_snapshots_and_frames_under_the_extensions_own_id_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db"), vec![], tally()).await;
    let session = new_session(&agent).await;
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    session
        .call_extension(&id(), "add", json!({"by": 7}))
        .await
        .unwrap();
    let Some(Ok(SessionFrame::Update(update))) = frames.next().await else {
        panic!("an update")
    };
    assert_eq!(update.footer.len(), 1);
    assert_eq!(update.footer[0].text, "tally 7");
    assert_eq!(update.footer[0].extension_id, id());

    for (asked, shown) in [
        (MAX_FOOTER_ROWS, MAX_FOOTER_ROWS),
        (MAX_FOOTER_ROWS + 1, MAX_FOOTER_ROWS),
    ] {
        session
            .call_extension(&id(), "rows", json!({"count": asked}))
            .await
            .unwrap();
        let footer = session.read(ReadOptions::default()).await.unwrap().footer;
        assert_eq!(footer.len(), shown);
        assert!(footer.iter().all(|row| row.extension_id == id()));
    }
    agent.close().await.unwrap();
}

#[tokio::test]
async fn without_the_projection_grant_there_are_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let extension = tally();
    let grants = extension.grants().without(Grant::Projection);
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        crate::support::harness::config(Arc::new(ScriptedModel::new(Script::new(vec![])))),
    )
    .extension(extension, grants)
    .open()
    .await
    .unwrap();
    let session = new_session(&agent).await;
    session
        .call_extension(&id(), "add", json!({"by": 1}))
        .await
        .unwrap();
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(snapshot.footer.is_empty());
    assert!(!snapshot.extensions.contains_key(&id()));
    agent.close().await.unwrap();
}

/// Sets the Session's tally; its type refuses unknown fields and has no `requestId`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Set {
    to: u64,
}

contract_commands!(Tally {
    Set => "set" in SessionScope -> u64,
});

#[tokio::test]
async fn a_strict_input_is_decoded_without_the_hosts_request_id_and_other_fields_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let strict = ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .session_state()
        .command(|tx, input: Set| {
            tx.put(StateScope::Session, "tally", "n", &input.to)?;
            Ok(input.to)
        })
        .build()
        .unwrap();
    let agent = open(&dir.path().join("agent.db"), vec![], strict).await;
    let session = new_session(&agent).await;
    let input = json!({"to": 3, "requestId": "set-1"});
    let first = session.call_extension(&id(), "set", input.clone()).await;
    let again = session.call_extension(&id(), "set", input).await;
    assert_eq!((first.unwrap(), again.unwrap()), (json!(3), json!(3)));
    let refused = session
        .call_extension(&id(), "set", json!({"to": 4, "extra": 1}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid);
    assert!(refused.message.starts_with("set: "), "{refused}");
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_run_contribution_gives_the_prompt_and_the_tools_of_one_reading() {
    use shiitake_capabilities::{Module, ModulePath, Operation, OperationName};
    use shiitake_core::extension::Contribution;
    let dir = tempfile::tempdir().unwrap();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reads.clone();
    let extension = ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .run_contribution(move |_run, _tools| {
            let read = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let look = Operation::from_fn(
                OperationName::new("look").unwrap(),
                "Looks.",
                |_input, _ctx| async { Ok(Value::Null) },
            );
            Contribution {
                prompt_section: Some(format!("reading {read}")),
                tools: Some(
                    Module::new(ModulePath::new("seen").unwrap(), "Seen.")
                        .with_operation(look)
                        .unwrap(),
                ),
                ..Contribution::default()
            }
        })
        .build()
        .unwrap();
    let grants = extension.grants();
    assert!(grants.has(Grant::Prompt) && grants.has(Grant::Tools));
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("ok")])));
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        crate::support::harness::config(model.clone()),
    )
    .kit_extension(extension)
    .open()
    .await
    .unwrap();
    let session = new_session(&agent).await;
    let work = send(&session, "look").await;
    terminal_of(&session, &work).await;
    let request = &model.requests()[0];
    assert!(request.system_prompt.contains("reading 0"));
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["seen__look"]);
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
    agent.close().await.unwrap();
}

#[test]
fn a_kit_extension_says_its_settled_hook_uses_agent_state_only_when_it_has_one() {
    use shiitake_core::extension::Extension;
    // No `.on_settled`: settles need not take the Agent lock for it.
    assert!(!tally().settled_uses_agent_state());
    let settling = ExtensionKit::<Tally>::new("tally")
        .unwrap()
        .agent_state()
        .on_settled(|_tx, _settled| Ok(()))
        .build()
        .unwrap();
    assert!(settling.settled_uses_agent_state());
}
