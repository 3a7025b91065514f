//! kill -9 at each crash point of an approval (a real child process,
//! `examples/approval_crash_harness.rs`, SIGKILLed where it says it stands), then the
//! same database reopened:
//!
//! - waiting for a person: the approval is still there after the restart, and allowing
//!   it runs the call once (0 lost approvals);
//! - approved and not yet run (the answer committed, the call's start not): the call
//!   runs exactly once after the restart;
//! - run but its result not committed: "outcome unknown", never run again;
//! - denied (the denial committed, the call's refusal not): never runs; the model
//!   reads the person's reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_testkit::TestAgent;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

/// The `approval_crash_harness` example, built by `cargo test` next to this test binary.
fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("approval_crash_harness")
}

/// Runs the harness to `point`, SIGKILLs it when it prints `marker`, returns the Session.
fn killed_at(point: &str, marker: &str, dir: &Path) -> SessionId {
    let mut child = Command::new(harness())
        .arg(point)
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let session = SessionId::new(first.strip_prefix("SESSION ").unwrap()).unwrap();
    let said = lines.next().unwrap().unwrap();
    assert_eq!(said, marker, "the harness stopped elsewhere");
    child.kill().unwrap(); // SIGKILL on Unix
    assert!(!child.wait().unwrap().success());
    session
}

/// The same database, reopened with the real extension and the tools, the model
/// answering `turns` (a resumed run's next model call).
async fn reopen(dir: &Path, turns: Vec<Turn>) -> TestAgent {
    TestAgent::builder()
        .file(dir.join("agent.db"))
        .turns(turns)
        .tools(catalog(dir, false).await)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .open()
        .await
}

/// The one terminal of the crashed run, once the resumed run settles.
async fn settled(session: &impl SessionApi) -> SessionTerminal {
    wait_for(
        session,
        |snapshot| snapshot.terminals.first().cloned(),
        |frame| match frame {
            SessionFrame::Update(update) => update.terminals.first().cloned(),
            _ => None,
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_survives_the_crash_and_its_call_runs_once_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let id = killed_at("pending", "WAITING", dir.path());
    assert!(notes(dir.path()).is_empty());
    let kit = reopen(dir.path(), vec![Turn::text("Written.")]).await;
    let session = kit.agent.session(id.clone());
    let waiting = until_waiting(&session, 1).await;
    assert_eq!(waiting[0].tool, "notes__write");
    assert_eq!(
        shiitake_ext_testkit::inbox_state(&kit.agent, &id).await,
        SessionInboxState::NeedsYou,
        "still needs the person"
    );
    bind_session_extension::<_, ApprovalContract>(&session)
        .call(&AnswerApproval {
            approval_id: waiting[0].approval_id.clone(),
            request_id: "after-the-crash".into(),
            decision: Decision::AllowOnce,
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(settled(&session).await.outcome, TerminalOutcome::Completed);
    assert_eq!(notes(dir.path()), ["once"], "ran once");
    assert_eq!(tool_texts(&transcript(&session).await), ["written"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_that_had_not_run_runs_exactly_once_after_the_crash() {
    let dir = tempfile::tempdir().unwrap();
    let id = killed_at("approved", "HELD", dir.path());
    assert!(notes(dir.path()).is_empty(), "approved, not run");
    let kit = reopen(dir.path(), vec![Turn::text("Written.")]).await;
    let session = kit.agent.session(id);
    assert_eq!(settled(&session).await.outcome, TerminalOutcome::Completed);
    assert_eq!(notes(dir.path()), ["once"], "exactly once");
    assert_eq!(tool_texts(&transcript(&session).await), ["written"]);
    assert!(waiting(&session).await.is_empty(), "nothing left to answer");
    assert_eq!(
        kit.model.requests().len(),
        1,
        "the model saw the result once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_ran_without_a_committed_result_is_outcome_unknown_and_never_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let id = killed_at("running", "TOOL_RUNNING", dir.path());
    assert_eq!(notes(dir.path()), ["once"], "it ran before the kill");
    let kit = reopen(dir.path(), vec![Turn::text("It may have been written.")]).await;
    let session = kit.agent.session(id);
    assert_eq!(settled(&session).await.outcome, TerminalOutcome::Completed);
    assert_eq!(notes(dir.path()), ["once"], "not run again");
    let results = tool_texts(&transcript(&session).await);
    assert_eq!(results.len(), 1);
    assert!(results[0].starts_with("outcome unknown"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_never_runs_across_the_crash() {
    let dir = tempfile::tempdir().unwrap();
    let id = killed_at("denied", "HELD", dir.path());
    let kit = reopen(dir.path(), vec![Turn::text("Not written.")]).await;
    let session = kit.agent.session(id);
    assert_eq!(settled(&session).await.outcome, TerminalOutcome::Completed);
    assert!(notes(dir.path()).is_empty(), "never ran");
    assert_eq!(
        tool_texts(&transcript(&session).await),
        [
            "not run: the person denied this call of notes__write. Their reason: not before the review"
        ]
    );
}
