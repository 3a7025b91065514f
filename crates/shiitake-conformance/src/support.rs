//! Small helpers the suite's tests share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use shiitake_protocol::message::{InputContent, Message, UserContent};
use shiitake_protocol::*;

/// The longest any wait in the suite may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Valid prompt text.
pub fn text(value: &str) -> PromptText {
    PromptText::new(value).unwrap()
}

/// A valid request id.
pub fn request(value: &str) -> RequestId {
    RequestId::new(value).unwrap()
}

/// A request id no other call of this process used.
pub fn unique_request(prefix: &str) -> RequestId {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    request(&format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ))
}

/// Creates a Session and addresses it.
pub async fn new_session<A: AgentApi>(agent: &A) -> A::Session {
    let id = agent
        .create_session(unique_request("create"))
        .await
        .unwrap();
    agent.session(id)
}

/// Sends a follow-up; returns its command id.
pub async fn send(session: &impl SessionApi, prompt: &str) -> CommandId {
    session
        .send(text(prompt), SendOptions::default())
        .await
        .unwrap()
        .command_id
}

/// Sends a steer; returns its command id.
pub async fn steer(session: &impl SessionApi, prompt: &str) -> CommandId {
    let options = SendOptions {
        delivery: Some(PromptDelivery::Steer),
        request_id: None,
    };
    session
        .send(text(prompt), options)
        .await
        .unwrap()
        .command_id
}

/// Waits until some frame (or the baseline) satisfies `found`.
pub async fn wait_for<T>(
    session: &impl SessionApi,
    mut found: impl FnMut(&SessionSnapshot) -> Option<T>,
    mut found_in_frame: impl FnMut(&SessionFrame) -> Option<T>,
) -> T {
    tokio::time::timeout(PATIENCE, async {
        let watch = session.watch(ReadOptions::default()).await.unwrap();
        if let Some(value) = found(&watch.snapshot) {
            return value;
        }
        let mut changes = watch.changes;
        while let Some(frame) = changes.next().await {
            let frame = frame.unwrap();
            if let SessionFrame::Reset(reset) = &frame
                && let Some(value) = found(&reset.baseline)
            {
                return value;
            }
            if let Some(value) = found_in_frame(&frame) {
                return value;
            }
        }
        panic!("the frame stream ended before the awaited change");
    })
    .await
    .expect("the awaited change happened in time")
}

/// Waits (bounded, polling) until `condition` holds: for facts outside the Session's frames.
pub async fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the condition never held"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the command has a terminal and returns it.
pub async fn terminal_of(session: &impl SessionApi, command_id: &CommandId) -> SessionTerminal {
    let find = |terminals: &[SessionTerminal]| {
        terminals
            .iter()
            .find(|t| &t.command_id == command_id)
            .cloned()
    };
    wait_for(
        session,
        |snapshot| find(&snapshot.terminals),
        |frame| match frame {
            SessionFrame::Update(update) => find(&update.terminals),
            _ => None,
        },
    )
    .await
}

/// Waits until the Session reports a running tool.
pub async fn active_tool(session: &impl SessionApi) -> String {
    wait_for(
        session,
        |snapshot| snapshot.activity.active_tool.clone(),
        |frame| match frame {
            SessionFrame::Update(update) => update.activity.active_tool.clone(),
            SessionFrame::Progress(progress) => progress.activity.active_tool.clone(),
            SessionFrame::Reset(_) => None,
        },
    )
    .await
}

/// The messages of the selected lineage (up to 200), oldest first.
pub async fn transcript(session: &impl SessionApi) -> Vec<Message> {
    let options = ReadOptions {
        limit: Some(PageLimit::new(200).unwrap()),
        ..ReadOptions::default()
    };
    session
        .read(options)
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.value)
        .collect()
}

/// One line per message, for whole-value comparisons.
pub fn outline(messages: &[Message]) -> Vec<String> {
    messages.iter().map(outline_one).collect()
}

fn outline_one(message: &Message) -> String {
    match message {
        Message::User(user) => match &user.content {
            UserContent::Text(text) => format!("user: {text}"),
            UserContent::Blocks(_) => "user: [blocks]".to_owned(),
        },
        Message::Assistant(assistant) => {
            let calls: Vec<_> = assistant.tool_calls().map(|c| c.name.clone()).collect();
            if calls.is_empty() {
                format!("assistant: {}", assistant.text())
            } else {
                format!("assistant: {}-> {}", assistant.text(), calls.join(","))
            }
        }
        Message::ToolResult(result) => {
            let text: String = result
                .content
                .iter()
                .map(|c| match c {
                    InputContent::Text(t) => t.text.clone(),
                    InputContent::Image(_) => "[image]".into(),
                })
                .collect();
            let error = if result.is_error { " (error)" } else { "" };
            format!("tool {}{error}: {text}", result.tool_name)
        }
    }
}
