//! A prompt runs to completion: user and assistant messages are committed, then a terminal.

mod common;

use common::*;
use futures::StreamExt;
use shiitake_model::Turn;
use shiitake_protocol::*;

#[tokio::test]
async fn a_prompt_runs_to_a_completed_terminal() {
    let harness = Harness::new(vec![Turn::text("Hello there, person.")]).await;
    let session = harness.session().await;
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let command_id = send(&session, "Say hello").await;
    let terminal = terminal_of(&session, &command_id).await;
    assert_eq!(
        (terminal.outcome, terminal.diagnostic),
        (TerminalOutcome::Completed, None)
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: Say hello", "assistant: Hello there, person."]
    );
    // Progress was streamed before the message was committed.
    let mut saw_progress = false;
    while let Some(frame) = frames.next().await {
        match frame.unwrap() {
            SessionFrame::Progress(progress) => {
                assert!(progress.progress.text.starts_with("Hello"), "{progress:?}");
                saw_progress = true;
            }
            SessionFrame::Update(update) if !update.terminals.is_empty() => break,
            _ => {}
        }
    }
    assert!(saw_progress);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    // Sequence 1 accepted the prompt, 2 committed it as the user entry, 3 the answer.
    let expected = SessionActivity {
        last_model_choice_sequence: Some(3),
        ..SessionActivity::default()
    };
    assert_eq!(snapshot.activity, expected);
    assert_eq!(snapshot.progress, None);
}

#[tokio::test]
async fn the_model_sees_the_system_prompt_and_the_prompt() {
    let harness = Harness::new(vec![Turn::text("ok")]).await;
    let session = harness.session().await;
    let command_id = send(&session, "What is 2+2?").await;
    terminal_of(&session, &command_id).await;
    let requests = harness.model.requests();
    assert_eq!(requests.len(), 1);
    assert!(!requests[0].system_prompt.is_empty());
    assert_eq!(outline(&requests[0].messages), vec!["user: What is 2+2?"]);
    let tool_names: Vec<_> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tool_names, vec!["test__echo", "test__slow"]);
}
