//! Failures are canonical errors with the right code; bad input never panics.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use crate::support::harness;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::{Script, Turn};
use shiitake_protocol::*;

#[tokio::test]
async fn a_cursor_of_another_lineage_is_invalid_for_read() {
    let fixture = harness::Local::start(Script::new(vec![Turn::text("a"), Turn::text("b")])).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    session
        .branch(snapshot.messages[0].id.clone())
        .await
        .unwrap();
    let stale = ReadOptions {
        before: snapshot.oldest_cursor.clone().flatten(),
        ..ReadOptions::default()
    };
    assert_eq!(
        session.read(stale).await.unwrap_err().code,
        ErrorCode::Invalid
    );
    let garbage = ReadOptions {
        before: Some(Cursor::new("garbage").unwrap()),
        ..ReadOptions::default()
    };
    assert_eq!(
        session.read(garbage).await.unwrap_err().code,
        ErrorCode::Invalid
    );
}

#[tokio::test]
async fn an_inbox_cursor_that_is_not_one_is_invalid() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let error = fixture
        .agent()
        .list_sessions(Some(&Cursor::new("v1.0.3").unwrap()))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Invalid);
}

#[tokio::test]
async fn branching_while_work_runs_is_a_conflict() {
    let slow = Turn::new(vec![
        shiitake_model::Step::DelayMs(20_000),
        shiitake_model::Step::Text("x".into()),
    ]);
    let fixture = harness::Local::start(Script::new(vec![Turn::text("a"), slow])).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    let entry = session.read(ReadOptions::default()).await.unwrap().messages[0]
        .id
        .clone();
    send(&session, "p2").await;
    eventually(|| fixture.model().calls() == 2).await;
    assert_eq!(
        session.branch(entry).await.unwrap_err().code,
        ErrorCode::Conflict
    );
    session.abort().await.unwrap();
}

#[tokio::test]
async fn retries_run_out_and_the_run_fails() {
    let fixture = harness::Local::start(Script::new(vec![
        Turn::fail(503),
        Turn::fail(503),
        Turn::fail(503),
    ]))
    .await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "unlucky").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    assert!(terminal.diagnostic.unwrap().contains("after 3 attempts"));
    assert_eq!(fixture.model().calls(), 3);
}

#[tokio::test]
async fn a_run_without_a_model_fails_with_how_to_configure_one() {
    let dir = tempfile::tempdir().unwrap();
    let resolver = shiitake_core::SpecResolver {
        default_spec: None,
        env: shiitake_model::ModelEnv::default(),
    };
    let config = shiitake_core::AgentConfig::new(std::sync::Arc::new(resolver));
    let agent = harness::open(&dir.path().join("agent.db"), Default::default(), config).await;
    let session = new_session(&agent).await;
    let command = send(&session, "hello?").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    let diagnostic = terminal.diagnostic.unwrap();
    assert!(
        diagnostic.contains("SHIITAKE_MODEL") && diagnostic.contains("docs/models.md"),
        "{diagnostic}"
    );
}
