//! An operator line accepted during a run waits for a safe place in the lineage:
//! it never lands between a tool call and its result.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use serde_json::json;
use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

#[tokio::test]
async fn a_line_during_a_run_enters_at_the_next_boundary() {
    let script = Script::new(vec![
        Turn::new(vec![
            Step::DelayMs(300),
            Step::tool_call("test__echo", json!({"n": 1})),
        ]),
        Turn::text("done"),
    ]);
    let fixture = harness::Local::start(script).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "work").await;
    eventually(|| fixture.model().calls() == 1).await;
    session
        .operator(
            request("line"),
            OperatorAuthor::Operator,
            text("Paused for review."),
        )
        .await
        .unwrap();
    terminal_of(&session, &command).await;
    assert_eq!(
        outline(&transcript(&session).await),
        vec![
            "user: work",
            "assistant: -> test__echo",
            r#"tool test__echo: {"echo":{"n":1}}"#,
            "user: Paused for review.",
            "assistant: done",
        ]
    );
}

#[tokio::test]
async fn a_line_after_the_last_model_call_is_appended_when_the_run_ends() {
    let script = Script::new(vec![Turn::new(vec![
        Step::DelayMs(300),
        Step::Text("answer".into()),
    ])]);
    let fixture = harness::Local::start(script).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "work").await;
    eventually(|| fixture.model().calls() == 1).await;
    session
        .operator(request("line"), OperatorAuthor::Party, text("Thanks!"))
        .await
        .unwrap();
    terminal_of(&session, &command).await;
    let lines = wait_for(
        &session,
        |snapshot| (snapshot.messages.len() == 3).then(|| snapshot.messages.clone()),
        |_| None,
    )
    .await;
    let values: Vec<_> = lines.into_iter().map(|m| m.value).collect();
    assert_eq!(
        outline(&values),
        vec!["user: work", "assistant: answer", "user: Thanks!"]
    );
    assert_eq!(fixture.model().calls(), 1, "a line needs no run");
}
