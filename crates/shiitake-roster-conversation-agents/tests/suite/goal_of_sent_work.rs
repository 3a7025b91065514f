//! The shared set's goal and conversation agents, composed: the sender's goal holds a
//! command it sent live until the child replies.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_model::Turn;
use shiitake_protocol::message::Message;
use shiitake_protocol::*;

use crate::support::*;

/// The sub-agent commands the Session's goal holds as live (`GoalProjection.waitingOn`).
async fn goal_waiting_on(session: &impl SessionApi) -> Vec<String> {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match shiitake_protocol::extension::view::<shiitake_ext_goal::contract::GoalContract>(
        &snapshot.extensions,
    )
    .unwrap()
    {
        shiitake_protocol::extension::ExtensionViewV0::Running { value: Some(goal) } => goal
            .waiting_on
            .into_iter()
            .map(|command| format!("{}:{}", command.agent, command.command_id))
            .collect(),
        other => panic!("goal runs in the shared set: {other:?}"),
    }
}

#[tokio::test]
async fn the_senders_goal_holds_a_sent_command_live_until_the_child_replies() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory::default());
    let (a, _a_tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call(
                "agents__send",
                json!({"agent": "B", "text": "Build it.", "mode": "continue"}),
            ),
            Turn::text("Sent."),
            Turn::text("Noted B's reply."),
        ],
        directory.clone(),
    )
    .await;
    let (_b, _b_tasks) = open(
        &dir,
        "B",
        vec![Turn::new(vec![
            shiitake_model::Step::DelayMs(1_500),
            shiitake_model::Step::Text("Built.".into()),
        ])],
        directory.clone(),
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Have B build it.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["status"], "working", "{results:?}");
    let command = results[0]["commandId"].as_str().unwrap();
    assert_eq!(
        goal_waiting_on(&session).await,
        [format!("B:{command}")],
        "the goal knows the work it sent is live"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !goal_waiting_on(&session).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply never reached the goal"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reply reaches the sender too (as a message of its own).
    loop {
        let texts: Vec<String> = transcript(&session)
            .await
            .iter()
            .filter_map(|m| match m {
                Message::User(user) => match &user.content {
                    shiitake_protocol::message::UserContent::Text(text) => Some(text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        if texts.iter().any(|text| text.starts_with("Agent B replied")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply never reached A: {texts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
