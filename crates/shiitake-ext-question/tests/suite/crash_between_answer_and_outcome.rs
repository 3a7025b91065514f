//! kill -9 between a committed answer and the committed tool outcome that carried it:
//! after the restart the answer reaches the model exactly once, in-turn when recovery
//! replays the call, or as one follow-up when the work is not resumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::support::*;
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

/// The `question_crash_harness` example, built by `cargo test` next to this test binary.
fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("question_crash_harness")
}

/// Runs the harness until it holds the tool outcome, SIGKILLs it, returns the Session.
fn killed_between_answer_and_outcome(db: &Path) -> SessionId {
    let mut child = Command::new(harness())
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let session = SessionId::new(first.strip_prefix("SESSION ").unwrap()).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "HELD");
    child.kill().unwrap(); // SIGKILL on Unix
    assert!(!child.wait().unwrap().success());
    session
}

async fn reopen(
    db: &Path,
    turns: Vec<Turn>,
    max_recoveries: u32,
) -> (shiitake_core::Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let agent = open_at(
        db,
        model.clone(),
        ManualClock::new(START),
        Default::default(),
        |config| {
            config.max_recoveries = max_recoveries;
        },
    )
    .await;
    (agent, model)
}

#[tokio::test]
async fn a_replayed_call_delivers_the_committed_answer_once_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agent.db");
    let session_id = killed_between_answer_and_outcome(&db);
    let (agent, model) = reopen(&db, vec![Turn::text("Using PostgreSQL.")], 3).await;
    let session = agent.session(session_id);
    let done = wait_for(
        &session,
        |snapshot| snapshot.terminals.first().cloned(),
        |frame| match frame {
            SessionFrame::Update(update) => update.terminals.first().cloned(),
            _ => None,
        },
    )
    .await;
    assert_eq!(done.outcome, TerminalOutcome::Completed);
    let messages = transcript(&session).await;
    let results = tool_values(&messages);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["status"], "answered");
    assert_eq!(
        results[0]["answers"][0]["selected"],
        serde_json::json!(["PostgreSQL"])
    );
    assert_eq!(
        user_texts(&messages).len(),
        1,
        "no follow-up besides the in-turn answer"
    );
    assert_eq!(model.requests().len(), 1, "the model saw the answer once");
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(projection(&snapshot).asks.is_empty());
}

#[tokio::test]
async fn work_that_is_not_resumed_sends_the_answer_once_as_a_follow_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agent.db");
    let session_id = killed_between_answer_and_outcome(&db);
    let (agent, model) = reopen(&db, vec![Turn::text("Got it: PostgreSQL.")], 0).await;
    let session = agent.session(session_id);
    let terminals = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let snapshot = session.read(ReadOptions::default()).await.unwrap();
            if snapshot.terminals.len() == 2 {
                return snapshot.terminals;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(terminals[0].outcome, TerminalOutcome::Interrupted);
    assert_eq!(terminals[1].outcome, TerminalOutcome::Completed);
    let texts = user_texts(&transcript(&session).await);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[1].contains("Answer: PostgreSQL"), "{}", texts[1]);
    assert_eq!(model.requests().len(), 1);
}
