//! A run starts from the transcript the Session's previous run ended with, plus
//! what its owner committed since; what the model reads is the same as a fresh read
//! of the lineage, however much was committed in between.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::{Script, Turn};
use shiitake_protocol::*;

/// Commits `count` operator lines, `line 0` onwards.
async fn operator_lines(session: &impl SessionApi, count: usize) {
    for n in 0..count {
        session
            .operator(
                request(&format!("line-{n}")),
                OperatorAuthor::Party,
                text(&format!("line {n}")),
            )
            .await
            .unwrap();
    }
}

/// Two runs with `lines` operator lines between them; returns what the second
/// run's model read.
async fn second_context(lines: usize) -> Vec<String> {
    let fixture =
        harness::Local::start(Script::new(vec![Turn::text("a1"), Turn::text("a2")])).await;
    let (agent, model) = (fixture.agent(), &fixture.model);
    let session = new_session(agent).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    operator_lines(&session, lines).await;
    let second = send(&session, "p2").await;
    assert_eq!(
        terminal_of(&session, &second).await.outcome,
        TerminalOutcome::Completed
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    outline(&requests[1].messages)
}

fn expected(lines: usize) -> Vec<String> {
    let mut expected = vec!["user: p1".to_owned(), "assistant: a1".to_owned()];
    expected.extend((0..lines).map(|n| format!("user: line {n}")));
    expected.push("user: p2".to_owned());
    expected
}

#[tokio::test]
async fn entries_committed_between_runs_join_the_kept_transcript() {
    assert_eq!(second_context(0).await, expected(0));
    assert_eq!(second_context(3).await, expected(3));
}

#[tokio::test]
async fn many_entries_between_runs_all_join() {
    // The owner appends every entry it commits between runs to the kept transcript.
    assert_eq!(second_context(62).await, expected(62));
    assert_eq!(second_context(63).await, expected(63));
}

#[tokio::test]
async fn a_new_sessions_first_run_reads_lines_committed_before_it() {
    let fixture = harness::Local::start(Script::new(vec![Turn::text("a1")])).await;
    let session = new_session(fixture.agent()).await;
    operator_lines(&session, 2).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    assert_eq!(
        outline(&fixture.model.requests()[0].messages),
        ["user: line 0", "user: line 1", "user: p1"]
    );
}
