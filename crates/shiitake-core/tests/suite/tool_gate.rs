//! The kit's tool gate on a real Agent: a rule that allows, denies or holds a call of
//! another source's tool; a held call waits in-turn until the gate's state changes,
//! parks when a steer arrives or its wait is spent, is aborted with its run; after a
//! restart a held call that never started runs once and one that started is "outcome
//! unknown"; a stopped gate refuses calls; `Grants::all()` grants no gate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_core::extension::kit::{ExtensionKit, HELD_COLLECTION, KitExtension};
use shiitake_core::extension::{
    GateMoment, GateVerdict, GatedCall, Grant, Grants, HookError, StateScope, Tx,
};
use shiitake_core::{Agent, AgentConfig, LocalSession};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::ExtensionContract;
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

use crate::support::harness;

enum GateContract {}
impl ExtensionContract for GateContract {
    const EXTENSION_ID: &'static str = "example-gate";
    type Projection = Value;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Rule {
    Allow,
    Deny,
    Ask,
    Fail,
}

fn gate_id() -> ExtensionId {
    ExtensionId::new(GateContract::EXTENSION_ID).unwrap()
}

/// `rules/<tool>` decides a first call; `answers/<execution id>` decides a held one.
fn rule(tx: &mut Tx<'_>, call: &GatedCall) -> Result<GateVerdict, HookError> {
    let answer =
        |tx: &Tx<'_>| tx.get::<Rule>(StateScope::Session, "answers", call.execution_id.as_str());
    Ok(match call.moment {
        GateMoment::Call => match tx.get::<Rule>(StateScope::Session, "rules", &call.tool_name)? {
            None => GateVerdict::Pass,
            Some(Rule::Allow) => GateVerdict::Allow,
            Some(Rule::Deny) => GateVerdict::Deny("denied by the test's rule".into()),
            Some(Rule::Ask) => GateVerdict::Ask,
            Some(Rule::Fail) => return Err(HookError::Failed("the rule broke".into())),
        },
        GateMoment::Resumed | GateMoment::Changed => match answer(tx)? {
            Some(Rule::Allow) => GateVerdict::Allow,
            Some(Rule::Deny) => GateVerdict::Deny("a person said no".into()),
            _ => GateVerdict::Ask,
        },
        GateMoment::Park(cause) => match answer(tx)? {
            Some(Rule::Allow) => GateVerdict::Allow,
            _ => GateVerdict::Deny(format!("parked ({cause:?})")),
        },
    })
}

fn gate() -> KitExtension<GateContract> {
    gate_seeing(Arc::default())
}

/// The gate, noting in `moments` each moment it is asked at.
fn gate_seeing(moments: Arc<std::sync::Mutex<Vec<String>>>) -> KitExtension<GateContract> {
    ExtensionKit::<GateContract>::new("gate")
        .unwrap()
        .untyped_command("set", CommandScope::Session, |tx, input| {
            let tool = input["tool"].as_str().unwrap_or_default().to_owned();
            let rule: Rule = serde_json::from_value(input["rule"].clone())
                .map_err(|error| HookError::Invalid(error.to_string()))?;
            tx.put(StateScope::Session, "rules", &tool, &rule)?;
            Ok(Value::Null)
        })
        .untyped_command("answer", CommandScope::Session, |tx, input| {
            let held: Vec<(String, Value)> = tx.scan(StateScope::Session, HELD_COLLECTION)?;
            let rule: Rule = serde_json::from_value(input["rule"].clone())
                .map_err(|error| HookError::Invalid(error.to_string()))?;
            for (execution, _) in &held {
                tx.put(StateScope::Session, "answers", execution, &rule)?;
            }
            Ok(json!(held.len()))
        })
        .untyped_command("held", CommandScope::Session, |tx, _| {
            let held: Vec<(String, Value)> = tx.scan(StateScope::Session, HELD_COLLECTION)?;
            Ok(json!(
                held.into_iter().map(|(_, state)| state).collect::<Vec<_>>()
            ))
        })
        .tool_gate(move |tx, call| {
            moments.lock().unwrap().push(format!("{:?}", call.moment));
            rule(tx, call)
        })
        .build()
        .unwrap()
}

/// `jobs.charge` (not replay-safe) counts its runs and hangs on its first when asked to;
/// `jobs.fetch` (replay-safe) only counts.
#[derive(Default)]
struct Jobs {
    charged: AtomicUsize,
    fetched: AtomicUsize,
    hang_first: std::sync::atomic::AtomicBool,
}

async fn catalog(jobs: Arc<Jobs>) -> Arc<Catalog> {
    let charge = {
        let jobs = jobs.clone();
        Operation::from_fn(
            OperationName::new("charge").unwrap(),
            "Charges a card.",
            move |_input: Value, _ctx| {
                let jobs = jobs.clone();
                async move {
                    let first = jobs.charged.fetch_add(1, Ordering::SeqCst) == 0;
                    if first && jobs.hang_first.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                    Ok(Value::from("charged"))
                }
            },
        )
        .with_replay(Replay::Unsafe)
    };
    let fetch = Operation::from_fn(
        OperationName::new("fetch").unwrap(),
        "Fetches a page.",
        move |_input: Value, _ctx| {
            let jobs = jobs.clone();
            async move {
                jobs.fetched.fetch_add(1, Ordering::SeqCst);
                Ok(Value::from("fetched"))
            }
        },
    )
    .with_replay(Replay::Safe);
    let module = Module::new(ModulePath::new("jobs").unwrap(), "Jobs.")
        .with_operation(charge)
        .unwrap()
        .with_operation(fetch)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("jobs"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

struct Gated {
    agent: Agent,
    jobs: Arc<Jobs>,
    model: Arc<ScriptedModel>,
}

async fn open(
    path: &std::path::Path,
    jobs: Arc<Jobs>,
    turns: Vec<Turn>,
    grants: Option<Grants>,
    tune: impl FnOnce(&mut AgentConfig),
) -> Gated {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let mut config = harness::config(model.clone());
    tune(&mut config);
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let gate = gate();
    let grants = grants.unwrap_or_else(|| gate.grants());
    let agent = Agent::builder(Arc::new(store), catalog(jobs.clone()).await, config)
        .extension(gate, grants)
        .open()
        .await
        .unwrap();
    Gated { agent, jobs, model }
}

/// A fresh Agent with the gate (its own grants) answering `turns`, and a new Session.
async fn fresh(
    turns: Vec<Turn>,
    tune: impl FnOnce(&mut AgentConfig),
) -> (tempfile::TempDir, Gated, LocalSession) {
    let dir = tempfile::tempdir().unwrap();
    let gated = open(
        &dir.path().join("agent.db"),
        Arc::default(),
        turns,
        None,
        tune,
    )
    .await;
    let session = new_session(&gated.agent).await;
    (dir, gated, session)
}

async fn set(session: &impl SessionApi, tool: &str, rule: Rule) {
    session
        .call_extension(&gate_id(), "set", json!({"tool": tool, "rule": rule}))
        .await
        .unwrap();
}

async fn answer(session: &impl SessionApi, rule: Rule) -> u64 {
    session
        .call_extension(&gate_id(), "answer", json!({"rule": rule}))
        .await
        .unwrap()
        .as_u64()
        .unwrap()
}

async fn held(session: &impl SessionApi) -> Vec<String> {
    let held = session
        .call_extension(&gate_id(), "held", json!({}))
        .await
        .unwrap();
    serde_json::from_value(held).unwrap()
}

/// Waits until the gate holds one call (its record says `waiting`).
async fn until_held(session: &impl SessionApi) {
    for _ in 0..500 {
        if held(session).await == ["waiting"] {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no call was held: {:?}", held(session).await);
}

fn charge_then_done() -> Vec<Turn> {
    vec![
        Turn::tool_call("jobs__charge", json!({})),
        Turn::text("done"),
    ]
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_reads_why() {
    let (_dir, gated, session) = fresh(charge_then_done(), |_| {}).await;
    set(&session, "jobs__charge", Rule::Deny).await;
    let command = send(&session, "charge it").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&transcript(&session).await),
        [
            "user: charge it",
            "assistant: -> jobs__charge",
            "tool jobs__charge (error): denied by the test's rule",
            "assistant: done"
        ]
    );
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_call_the_gate_passes_or_allows_runs_and_a_gate_granted_by_all_is_never_asked() {
    let (_dir, gated, session) = fresh(
        vec![
            Turn::tool_call("jobs__fetch", json!({})),
            Turn::tool_call("jobs__charge", json!({})),
            Turn::text("done"),
        ],
        |_| {},
    )
    .await;
    set(&session, "jobs__charge", Rule::Allow).await;
    let command = send(&session, "fetch and charge").await;
    terminal_of(&session, &command).await;
    assert_eq!(gated.jobs.fetched.load(Ordering::SeqCst), 1, "passed");
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 1, "allowed");
    assert!(held(&session).await.is_empty(), "nothing was held");

    let dir = tempfile::tempdir().unwrap();
    assert!(!Grants::all().has(Grant::Gate));
    let everything = open(
        &dir.path().join("agent.db"),
        Arc::default(),
        charge_then_done(),
        Some(Grants::all()),
        |_| {},
    )
    .await;
    let session = new_session(&everything.agent).await;
    set(&session, "jobs__charge", Rule::Deny).await;
    let command = send(&session, "charge it").await;
    terminal_of(&session, &command).await;
    assert_eq!(
        everything.jobs.charged.load(Ordering::SeqCst),
        1,
        "not a gate without the gate grant"
    );
}

#[tokio::test]
async fn a_held_call_waits_in_turn_and_runs_once_when_allowed() {
    let (_dir, gated, session) = fresh(charge_then_done(), |_| {}).await;
    set(&session, "jobs__charge", Rule::Ask).await;
    let command = send(&session, "charge it").await;
    until_held(&session).await;
    assert_eq!(active_tool(&session).await, "jobs__charge");
    assert_eq!(
        gated.jobs.charged.load(Ordering::SeqCst),
        0,
        "held, not run"
    );
    assert_eq!(answer(&session, Rule::Allow).await, 1);
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 1);
    let lines = outline(&transcript(&session).await);
    assert_eq!(lines[2], "tool jobs__charge: charged");
    assert!(
        held(&session).await.is_empty(),
        "forgotten when the run settled"
    );
    assert_eq!(gated.model.requests().len(), 2);
}

#[tokio::test]
async fn a_held_call_is_denied_parked_by_a_steer_or_aborted_with_its_run() {
    let (_dir, gated, session) = fresh(
        vec![
            Turn::tool_call("jobs__charge", json!({})),
            Turn::text("not charged"),
            Turn::tool_call("jobs__charge", json!({})),
            Turn::text("steered"),
            Turn::tool_call("jobs__charge", json!({})),
        ],
        |_| {},
    )
    .await;
    set(&session, "jobs__charge", Rule::Ask).await;

    let denied = send(&session, "one").await;
    until_held(&session).await;
    answer(&session, Rule::Deny).await;
    terminal_of(&session, &denied).await;
    let lines = outline(&transcript(&session).await);
    assert_eq!(lines[2], "tool jobs__charge (error): a person said no");

    let parked = send(&session, "two").await;
    until_held(&session).await;
    steer(&session, "never mind").await;
    terminal_of(&session, &parked).await;
    let lines = outline(&transcript(&session).await);
    assert_eq!(lines[6], "tool jobs__charge (error): parked (Steer)");
    assert_eq!(lines[7], "user: never mind");

    let aborted = send(&session, "three").await;
    until_held(&session).await;
    session.abort().await.unwrap();
    assert_eq!(
        terminal_of(&session, &aborted).await.outcome,
        TerminalOutcome::Cancelled
    );
    let lines = outline(&transcript(&session).await);
    assert_eq!(
        lines.last().unwrap(),
        "tool jobs__charge (error): aborted: the run was cancelled"
    );
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 0);
    assert!(held(&session).await.is_empty());
}

#[tokio::test]
async fn a_held_call_whose_wait_is_spent_parks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A 60 s deadline leaves nothing once the wait's minute is kept back.
    let gated = open(
        &dir.path().join("agent.db"),
        Arc::default(),
        charge_then_done(),
        None,
        |config| config.tool_timeout = Duration::from_secs(60),
    )
    .await;
    let session = new_session(&gated.agent).await;
    set(&session, "jobs__charge", Rule::Ask).await;
    let command = send(&session, "charge it").await;
    terminal_of(&session, &command).await;
    let lines = outline(&transcript(&session).await);
    assert_eq!(lines[2], "tool jobs__charge (error): parked (Waited)");
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn after_a_restart_a_held_call_runs_once_and_a_started_one_is_outcome_unknown() {
    // Held and answered while the Agent is closed: the answer is committed, the call
    // never started, so the resumed run runs it once.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let jobs = Arc::new(Jobs::default());
    let first = open(&path, jobs.clone(), charge_then_done(), None, |_| {}).await;
    let session = new_session(&first.agent).await;
    let id = session.session_id().clone();
    set(&session, "jobs__charge", Rule::Ask).await;
    let command = send(&session, "charge it").await;
    until_held(&session).await;
    first.agent.close().await.unwrap();
    let second = open(&path, jobs.clone(), vec![Turn::text("done")], None, |_| {}).await;
    let session = second.agent.session(id.clone());
    until_held(&session).await;
    answer(&session, Rule::Allow).await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(jobs.charged.load(Ordering::SeqCst), 1);
    second.agent.close().await.unwrap();

    // Allowed and running when the Agent stops: it may have run, so it is not run again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let jobs = Arc::new(Jobs::default());
    jobs.hang_first.store(true, Ordering::SeqCst);
    let first = open(&path, jobs.clone(), charge_then_done(), None, |_| {}).await;
    let session = new_session(&first.agent).await;
    let id = session.session_id().clone();
    set(&session, "jobs__charge", Rule::Ask).await;
    let command = send(&session, "charge it").await;
    until_held(&session).await;
    answer(&session, Rule::Allow).await;
    eventually(|| jobs.charged.load(Ordering::SeqCst) == 1).await;
    first.agent.close().await.unwrap();
    let second = open(&path, jobs.clone(), vec![Turn::text("done")], None, |_| {}).await;
    let session = second.agent.session(id);
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    let lines = outline(&transcript(&session).await);
    assert!(
        lines[2].starts_with("tool jobs__charge (error): outcome unknown"),
        "{lines:?}"
    );
    assert_eq!(jobs.charged.load(Ordering::SeqCst), 1, "never run twice");
}

#[tokio::test]
async fn a_stopped_gate_refuses_calls_until_it_is_resumed() {
    let (_dir, gated, session) = fresh(
        vec![
            Turn::tool_call("jobs__charge", json!({})),
            Turn::tool_call("jobs__fetch", json!({})),
            Turn::text("done"),
            Turn::tool_call("jobs__fetch", json!({})),
            Turn::text("done again"),
        ],
        |_| {},
    )
    .await;
    set(&session, "jobs__charge", Rule::Fail).await;
    let command = send(&session, "charge and fetch").await;
    terminal_of(&session, &command).await;
    let lines = outline(&transcript(&session).await);
    assert!(
        lines[2].starts_with(
            "tool jobs__charge (error): not run: the tool gate example-gate could not decide"
        ),
        "{lines:?}"
    );
    assert!(
        lines[4].starts_with(
            "tool jobs__fetch (error): not run: the tool gate example-gate could not decide"
        ),
        "a stopped gate fails closed: {lines:?}"
    );
    assert_eq!(gated.jobs.charged.load(Ordering::SeqCst), 0);
    assert_eq!(gated.jobs.fetched.load(Ordering::SeqCst), 0);

    gated.agent.resume_extension(&gate_id()).await.unwrap();
    let command = send(&session, "fetch").await;
    terminal_of(&session, &command).await;
    assert_eq!(
        gated.jobs.fetched.load(Ordering::SeqCst),
        1,
        "resumed, it passes"
    );
}

/// A call held at the gate when a commit of its Session fails for a reason that passes
/// (the owner pauses for its store): the paused run stops, and the resumed run asks
/// about the call it never started again, which the kit's record makes the held call
/// it was (the rule sees it resumed, not a second first call); answered, it runs once.
#[tokio::test]
async fn a_held_call_survives_a_pause_for_the_store_and_runs_once_when_answered() {
    use shiitake_conformance::flaky_store::{FlakyStore, pause_owner};
    let dir = tempfile::tempdir().unwrap();
    let jobs: Arc<Jobs> = Arc::default();
    let model = Arc::new(ScriptedModel::new(Script::new(charge_then_done())));
    let config = harness::config(model.clone());
    let sqlite = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let store = FlakyStore::new(Arc::new(sqlite));
    let moments = Arc::new(std::sync::Mutex::new(Vec::new()));
    let gate = gate_seeing(moments.clone());
    let grants = gate.grants();
    let agent = Agent::builder(store.clone(), catalog(jobs.clone()).await, config)
        .extension(gate, grants)
        .open()
        .await
        .unwrap();
    let session = new_session(&agent).await;
    set(&session, "jobs__charge", Rule::Ask).await;
    let command = send(&session, "charge it").await;
    until_held(&session).await;

    // A commit of the Session fails: the owner pauses, then the store is back.
    pause_owner(&session, &store).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before_answer = moments.lock().unwrap().clone();
    for _ in 0..200 {
        if answer(&session, Rule::Allow).await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(jobs.charged.load(Ordering::SeqCst), 1, "ran once");
    // Asked once as a first call; after the pause, as the held call it was.
    assert_eq!(
        before_answer
            .iter()
            .filter(|moment| *moment == "Call")
            .count(),
        1,
        "{before_answer:?}"
    );
    assert_eq!(
        before_answer.last().map(String::as_str),
        Some("Resumed"),
        "{before_answer:?}"
    );
    assert_eq!(
        held(&session).await,
        Vec::<String>::new(),
        "settled: no held call left"
    );
    agent.close().await.unwrap();
}
