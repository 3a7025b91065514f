//! Accepted work survives a restart of the Agent: nothing accepted is lost,
//! nothing settled runs again, and the model preference is kept.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use crate::support::harness;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

#[tokio::test]
async fn pending_and_running_work_resume_after_reopen() {
    let slow = Turn::new(vec![Step::DelayMs(20_000), Step::Text("never".into())]);
    let fixture = harness::Local::start(Script::new(vec![Turn::text("first"), slow])).await;
    let session = new_session(fixture.agent()).await;
    let settled = send(&session, "p1").await;
    terminal_of(&session, &settled).await;
    let running = send(&session, "p2").await;
    let waiting = send(&session, "p3").await;
    eventually(|| fixture.model().calls() == 2).await;
    let id = session.session_id().clone();

    let fixture = fixture
        .reopen(Script::new(vec![Turn::text("second"), Turn::text("third")]))
        .await;
    let session = fixture.agent().session(id);
    assert_eq!(
        terminal_of(&session, &running).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        terminal_of(&session, &waiting).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec![
            "user: p1",
            "assistant: first",
            "user: p2",
            "assistant: second",
            "user: p3",
            "assistant: third"
        ]
    );
    assert_eq!(
        fixture.model().calls(),
        2,
        "p1 settled before the restart and did not run again"
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let terminals: Vec<_> = snapshot
        .terminals
        .iter()
        .map(|t| t.command_id.clone())
        .collect();
    assert_eq!(terminals, vec![settled, running, waiting]);
}

#[tokio::test]
async fn the_model_preference_survives_reopen() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let session = new_session(fixture.agent()).await;
    let preference = ModelPreference {
        model: ModelSpec::new("anthropic:claude-sonnet-4").unwrap(),
        reasoning: None,
    };
    session
        .set_model_preference(preference.clone())
        .await
        .unwrap();
    let id = session.session_id().clone();
    let fixture = fixture.reopen(Script::new(vec![])).await;
    assert_eq!(
        fixture
            .agent()
            .session(id)
            .model_preference()
            .await
            .unwrap(),
        Some(preference)
    );
}

#[tokio::test]
async fn an_exact_retry_after_reopen_answers_the_original() {
    let fixture = harness::Local::start(Script::new(vec![Turn::text("once")])).await;
    let session = new_session(fixture.agent()).await;
    let options = || SendOptions {
        delivery: None,
        request_id: Some(request("across-restarts")),
    };
    let first = session.send(text("hello"), options()).await.unwrap();
    terminal_of(&session, &first.command_id).await;
    let id = session.session_id().clone();
    let fixture = fixture.reopen(Script::new(vec![])).await;
    let again = fixture
        .agent()
        .session(id)
        .send(text("hello"), options())
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(fixture.model().calls(), 0);
}
