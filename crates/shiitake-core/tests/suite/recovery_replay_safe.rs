//! After a restart, a tool call without a committed result runs again only when
//! its operation is replay-safe; otherwise the model is told its outcome is unknown.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use crate::support::harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, ExecutionId, Module, ModulePath, Operation, OperationName, Replay, SourceId,
    StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

/// `jobs.fetch` (replay-safe) and `jobs.charge` (not): both hang on their first
/// execution, so a restart always finds them in flight; later executions answer.
struct Jobs {
    starts: AtomicUsize,
    execution_ids: std::sync::Mutex<Vec<String>>,
}

async fn catalog(jobs: Arc<Jobs>) -> Arc<Catalog> {
    let op = |name: &str, replay: Replay| {
        let jobs = jobs.clone();
        Operation::from_fn(
            OperationName::new(name).unwrap(),
            "A job.",
            move |_input: Value, ctx| {
                let jobs = jobs.clone();
                let id: ExecutionId = ctx.execution_id().clone();
                async move {
                    jobs.execution_ids
                        .lock()
                        .unwrap()
                        .push(id.as_str().to_owned());
                    if jobs.starts.fetch_add(1, Ordering::SeqCst) == 0 {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                    Ok(Value::from("finished"))
                }
            },
        )
        .with_replay(replay)
    };
    let module = Module::new(ModulePath::new("jobs").unwrap(), "Jobs.")
        .with_operation(op("fetch", Replay::Safe))
        .unwrap()
        .with_operation(op("charge", Replay::Unsafe))
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

async fn interrupted_then_resumed(tool: &str) -> (Vec<String>, Arc<Jobs>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let jobs = Arc::new(Jobs {
        starts: AtomicUsize::new(0),
        execution_ids: Default::default(),
    });
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::tool_call(
        tool,
        json!({}),
    )])));
    let agent =
        harness::open_with(&path, catalog(jobs.clone()).await, harness::config(model)).await;
    let session = new_session(&agent).await;
    let command = send(&session, "do the job").await;
    assert_eq!(active_tool(&session).await, tool);
    let id = session.session_id().clone();
    agent.close().await.unwrap();

    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text(
        "all done",
    )])));
    let agent =
        harness::open_with(&path, catalog(jobs.clone()).await, harness::config(model)).await;
    let session = agent.session(id);
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    (outline(&transcript(&session).await), jobs)
}

#[tokio::test]
async fn a_replay_safe_call_runs_again_with_the_same_execution_id() {
    let (lines, jobs) = interrupted_then_resumed("jobs__fetch").await;
    assert_eq!(
        lines,
        vec![
            "user: do the job",
            "assistant: -> jobs__fetch",
            "tool jobs__fetch: finished",
            "assistant: all done"
        ]
    );
    let ids = jobs.execution_ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "a re-execution keeps its execution id");
}

#[tokio::test]
async fn an_unsafe_call_is_not_run_again() {
    let (lines, jobs) = interrupted_then_resumed("jobs__charge").await;
    assert_eq!(
        lines[..2],
        [
            "user: do the job".to_owned(),
            "assistant: -> jobs__charge".to_owned()
        ]
    );
    assert!(
        lines[2].starts_with("tool jobs__charge (error): outcome unknown"),
        "{lines:?}"
    );
    assert_eq!(lines[3], "assistant: all done");
    assert_eq!(jobs.starts.load(Ordering::SeqCst), 1);
}
