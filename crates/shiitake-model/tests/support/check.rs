//! Runs a model call and checks the event grammar every model must keep.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use shiitake_model::{
    AssistantEvent, AssistantStream, Model, ModelContext, ModelError, ModelOptions,
};
use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, Message, StopReason, UserMessage,
};
use tokio_util::sync::CancellationToken;

/// A context with one user message and no tools.
pub fn ask(text: &str) -> ModelContext {
    ModelContext {
        system_prompt: "You are a test.".into(),
        messages: vec![Message::User(UserMessage::text(text, 1))].into(),
        tools: vec![],
    }
}

/// Collects every event of a stream, failing the test if it takes over 30 s.
pub async fn collect(mut stream: AssistantStream) -> Vec<AssistantEvent> {
    let mut events = Vec::new();
    let all = async {
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("stream did not end in 30 s");
    events
}

/// Calls the model and collects the events, checking the grammar; `Err` is the pre-stream error.
pub async fn call(
    model: &dyn Model,
    context: ModelContext,
    options: ModelOptions,
) -> Result<(Vec<AssistantEvent>, AssistantMessage), ModelError> {
    let stream = model
        .stream(context, options, CancellationToken::new())
        .await?;
    let events = collect(stream).await;
    let message = check_grammar(&events);
    Ok((events, message))
}

/// Asserts the event grammar and returns the final message.
///
/// `start` first; blocks open in order with `contentIndex` equal to their
/// position, take deltas only while open, and end with the accumulated
/// content; exactly one terminal event, last; `done` has every block ended and
/// the final message matches the deltas.
pub fn check_grammar(events: &[AssistantEvent]) -> AssistantMessage {
    assert!(
        matches!(events.first(), Some(AssistantEvent::Start)),
        "first event must be start: {events:?}"
    );
    let terminals = events
        .iter()
        .filter(|e| e.final_message().is_some())
        .count();
    assert_eq!(terminals, 1, "exactly one terminal event: {events:?}");
    let last = events
        .last()
        .and_then(AssistantEvent::final_message)
        .expect("terminal event last");
    // (kind, accumulated text, ended)
    let mut blocks: Vec<(&str, String, bool)> = Vec::new();
    let open = |blocks: &Vec<(&str, String, bool)>, index: usize, kind: &str| {
        assert_eq!(
            index + 1,
            blocks.len(),
            "delta/end for a block that is not the newest"
        );
        assert_eq!(blocks[index].0, kind, "delta kind matches block kind");
        assert!(!blocks[index].2, "block {index} already ended");
    };
    for event in &events[1..events.len() - 1] {
        match event {
            AssistantEvent::TextStart { content_index }
            | AssistantEvent::ThinkingStart { content_index }
            | AssistantEvent::ToolcallStart { content_index, .. } => {
                assert_eq!(*content_index, blocks.len(), "blocks open in order");
                if let Some(previous) = blocks.last() {
                    assert!(previous.2, "a block opened before the previous one ended");
                }
                let kind = match event {
                    AssistantEvent::TextStart { .. } => "text",
                    AssistantEvent::ThinkingStart { .. } => "thinking",
                    _ => "toolCall",
                };
                blocks.push((kind, String::new(), false));
            }
            AssistantEvent::TextDelta {
                content_index,
                delta,
            } => {
                open(&blocks, *content_index, "text");
                blocks[*content_index].1.push_str(delta);
            }
            AssistantEvent::ThinkingDelta {
                content_index,
                delta,
            } => {
                open(&blocks, *content_index, "thinking");
                blocks[*content_index].1.push_str(delta);
            }
            AssistantEvent::ToolcallDelta {
                content_index,
                delta,
            } => {
                open(&blocks, *content_index, "toolCall");
                blocks[*content_index].1.push_str(delta);
            }
            AssistantEvent::TextEnd {
                content_index,
                content,
            } => {
                open(&blocks, *content_index, "text");
                assert_eq!(
                    &blocks[*content_index].1, content,
                    "text_end content = deltas"
                );
                blocks[*content_index].2 = true;
            }
            AssistantEvent::ThinkingEnd {
                content_index,
                content,
            } => {
                open(&blocks, *content_index, "thinking");
                assert_eq!(
                    &blocks[*content_index].1, content,
                    "thinking_end content = deltas"
                );
                blocks[*content_index].2 = true;
            }
            AssistantEvent::ToolcallEnd {
                content_index,
                tool_call,
            } => {
                open(&blocks, *content_index, "toolCall");
                let raw = &blocks[*content_index].1;
                let decoded: Value = if raw.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    serde_json::from_str(raw).expect("tool call deltas form JSON")
                };
                assert_eq!(
                    decoded,
                    Value::Object(tool_call.arguments.clone()),
                    "toolcall_end args = deltas"
                );
                blocks[*content_index].2 = true;
            }
            other => panic!("unexpected event in the middle: {other:?}"),
        }
    }
    assert_eq!(
        last.content.len(),
        blocks.len(),
        "final message has one block per started block"
    );
    for (block, (kind, text, _)) in last.content.iter().zip(&blocks) {
        match block {
            AssistantContent::Text(t) => {
                assert_eq!(*kind, "text");
                assert_eq!(&t.text, text);
            }
            AssistantContent::Thinking(t) => {
                assert_eq!(*kind, "thinking");
                assert_eq!(&t.thinking, text);
            }
            AssistantContent::ToolCall(_) => assert_eq!(*kind, "toolCall"),
        }
    }
    match events.last() {
        Some(AssistantEvent::Done { reason, message }) => {
            assert_eq!(*reason, message.stop_reason);
            assert!(matches!(
                reason,
                StopReason::Stop | StopReason::Length | StopReason::ToolUse
            ));
            assert!(message.error_message.is_none());
            assert!(blocks.iter().all(|b| b.2), "done with a block still open");
        }
        Some(AssistantEvent::Error { reason, error }) => {
            assert_eq!(*reason, error.stop_reason);
            assert!(matches!(reason, StopReason::Error | StopReason::Aborted));
            assert!(
                error
                    .error_message
                    .as_deref()
                    .is_some_and(|m| !m.is_empty()),
                "errorMessage set"
            );
        }
        _ => unreachable!(),
    }
    last.clone()
}
