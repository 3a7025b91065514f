//! A send waits for the reply, is recorded, and a later send continues the Session.

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_ext_agents::contract::Via;
use shiitake_model::Turn;
use shiitake_protocol::message::Message;
use shiitake_protocol::*;

use crate::support::*;

#[tokio::test]
async fn a_send_waits_for_the_reply_and_is_recorded_and_continued() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory::default());
    let (a, _a_tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call("agents__send", json!({"agent": "B", "text": "Say hello."})),
            Turn::tool_call("agents__send", json!({"agent": "B", "text": "Again."})),
            Turn::text("Done."),
        ],
        directory.clone(),
    )
    .await;
    let (b, _b_tasks) = open(
        &dir,
        "B",
        vec![Turn::text("Hello from B."), Turn::text("Hello again.")],
        directory.clone(),
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Talk to B.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["status"], "replied", "{results:?}");
    assert_eq!(results[0]["reply"], "Hello from B.");
    assert_eq!(results[1]["reply"], "Hello again.");
    assert_eq!(
        results[0]["sessionId"], results[1]["sessionId"],
        "a later send continues the Session"
    );
    let child = SessionId::new(results[0]["sessionId"].as_str().unwrap()).unwrap();
    let rows = records(&a, session.session_id()).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].agent.as_str(),
            rows[0].session_id.as_str(),
            rows[0].via
        ),
        ("B", child.as_str(), Via::Sent)
    );
    assert_eq!(
        rows[0].last_command_id.as_deref(),
        results[1]["commandId"].as_str()
    );
    let b_texts: Vec<String> = transcript(&b.session(child))
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
    assert_eq!(b_texts, ["Say hello.", "Again."]);
}
