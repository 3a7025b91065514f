//! Compaction: an over-budget context is summarised by the model; later contexts
//! read the summary, the transcript keeps every message, and a marker is published.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use shiitake_conformance::TestTools;
use shiitake_conformance::support::*;
use shiitake_core::config::CompactionPolicy;
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::*;

/// An Agent on `dir`'s database whose model plays `script` and whose context is
/// compacted above `budget_tokens`, keeping at least the last message.
async fn open_with_budget(
    dir: &std::path::Path,
    script: Script,
    budget_tokens: usize,
) -> (shiitake_core::Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(script));
    let mut config = harness::config(model.clone());
    config.compaction = Some(CompactionPolicy {
        budget_tokens,
        keep_recent: 1,
    });
    let agent = harness::open(
        &dir.join("agent.db"),
        Arc::new(TestTools::default()),
        config,
    )
    .await;
    (agent, model)
}

#[tokio::test]
async fn an_over_budget_context_is_summarised_and_marked() {
    let long = "word ".repeat(200);
    let script = Script::new(vec![
        Turn::text(long.clone()),
        Turn::text("SUMMARY: the person asked twice"),
        Turn::text("second answer"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (agent, model) = open_with_budget(dir.path(), script, 150).await;
    let session = new_session(&agent).await;
    let first = send(&session, "first question").await;
    terminal_of(&session, &first).await;

    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let second = send(&session, "second question").await;
    assert_eq!(
        terminal_of(&session, &second).await.outcome,
        TerminalOutcome::Completed
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 3, "answer, summary, answer");
    assert_eq!(
        outline(&requests[1].messages),
        vec![
            "user: first question".to_owned(),
            format!("assistant: {long}"),
            "user: Summarise the conversation above.".to_owned(),
        ]
    );
    assert!(
        requests[1].tools.is_empty(),
        "the summary call offers no tools"
    );
    assert_eq!(
        outline(&requests[2].messages),
        vec![
            "user: Summary of the earlier conversation:\n\nSUMMARY: the person asked twice",
            "user: second question",
        ]
    );

    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        outline(
            &snapshot
                .messages
                .iter()
                .map(|m| m.value.clone())
                .collect::<Vec<_>>()
        ),
        vec![
            "user: first question".to_owned(),
            format!("assistant: {long}"),
            "user: second question".to_owned(),
            "assistant: second answer".to_owned(),
        ],
        "the transcript keeps every message"
    );
    let markers = snapshot
        .compactions
        .expect("the snapshot carries the marker");
    assert_eq!(markers.len(), 1);
    assert_eq!(
        markers[0].sequence, snapshot.messages[2].sequence,
        "it precedes the first kept message"
    );

    let mut published = None;
    while let Some(frame) = frames.next().await {
        if let SessionFrame::Update(update) = frame.unwrap()
            && let Some(compactions) = update.compactions
        {
            published = Some(compactions);
            break;
        }
    }
    assert_eq!(published.unwrap(), markers);
}

#[tokio::test]
async fn a_later_run_reads_the_stored_summary() {
    // ~500 estimated tokens: over the budget only while it is in the context.
    let long = "word ".repeat(400);
    let script = Script::new(vec![
        Turn::text(long),
        Turn::text("SUMMARY ONE"),
        Turn::text("two"),
        Turn::text("three"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (agent, model) = open_with_budget(dir.path(), script, 400).await;
    let session = new_session(&agent).await;
    for prompt in ["one?", "two?", "three?"] {
        let command = send(&session, prompt).await;
        assert_eq!(
            terminal_of(&session, &command).await.outcome,
            TerminalOutcome::Completed
        );
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "one answer each, one summary");
    // The third run loads the summary the second one stored.
    assert_eq!(
        outline(&requests[3].messages),
        vec![
            "user: Summary of the earlier conversation:\n\nSUMMARY ONE",
            "user: two?",
            "assistant: two",
            "user: three?",
        ]
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        snapshot.messages.len(),
        6,
        "the transcript keeps every message"
    );
    assert_eq!(snapshot.compactions.unwrap().len(), 1);

    // A new process reads the lineage from the store and applies the stored summary.
    let session_id = session.session_id().clone();
    agent.close().await.unwrap();
    let (agent, model) =
        open_with_budget(dir.path(), Script::new(vec![Turn::text("four")]), 400).await;
    let session = agent.session(session_id);
    let command = send(&session, "four?").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&model.requests()[0].messages),
        vec![
            "user: Summary of the earlier conversation:\n\nSUMMARY ONE",
            "user: two?",
            "assistant: two",
            "user: three?",
            "assistant: three",
            "user: four?",
        ]
    );
}

#[tokio::test]
async fn a_model_that_gives_no_summary_is_asked_once_a_run() {
    let long = "word ".repeat(400);
    let script = Script::new(vec![
        Turn::text(long),
        // The second run: the summary comes back empty, then two tool calls and an answer.
        Turn::text(""),
        Turn::new(vec![Step::tool_call("test__echo", json!({"n": 1}))]),
        Turn::new(vec![Step::tool_call("test__echo", json!({"n": 2}))]),
        Turn::text("done"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (agent, model) = open_with_budget(dir.path(), script, 400).await;
    let session = new_session(&agent).await;
    for prompt in ["one?", "two?"] {
        let command = send(&session, prompt).await;
        assert_eq!(
            terminal_of(&session, &command).await.outcome,
            TerminalOutcome::Completed
        );
    }
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        5,
        "one failed summary, then three calls with the full context"
    );
    assert!(requests[1].tools.is_empty(), "the summary call");
    for request in &requests[2..] {
        assert!(!request.tools.is_empty(), "no second summary call");
        assert_eq!(
            outline(&request.messages)[0],
            "user: one?",
            "the full context is sent"
        );
    }
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(snapshot.compactions.unwrap_or_default().is_empty());
}
