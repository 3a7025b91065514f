//! Replay rules: how a transcript becomes the messages sent to a model.
//!
//! Both providers call [`prepare`] before encoding a request, and the runner
//! may call it to see what the model will read. It is a pure function.

use std::collections::HashSet;

use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, Extra, InputContent, Message, StopReason, TextContent,
    ToolResultMessage,
};

use crate::model::ModelInfo;

/// The text of the synthetic result given to a tool call that has none.
pub const MISSING_RESULT_TEXT: &str =
    "No result: the tool call did not complete (the run was interrupted before it answered).";

/// Applies the replay rules to a transcript for the model `target`.
///
/// 1. Assistant messages that ended in `error` or `aborted` are skipped, and
///    so are tool results answering calls that no longer appear.
/// 2. A tool call with no result gets a synthetic error result
///    ([`MISSING_RESULT_TEXT`]) right after the results it does have.
/// 3. An assistant message from another model (api, provider or model id
///    differ) loses its provider signatures; its thinking is replayed as text
///    and redacted thinking is dropped.
pub fn prepare(messages: &[Message], target: &ModelInfo) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // Calls of the latest assistant message still waiting for a result.
    let mut pending: Vec<(String, String, u64)> = Vec::new();
    let mut known_calls: HashSet<String> = HashSet::new();
    for message in messages {
        match message {
            Message::Assistant(assistant)
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) => {}
            Message::Assistant(assistant) => {
                close_pending(&mut out, &mut pending);
                let assistant = if same_model(assistant, target) {
                    assistant.clone()
                } else {
                    strip_for_other_model(assistant)
                };
                for call in assistant.tool_calls() {
                    known_calls.insert(call.id.clone());
                    pending.push((call.id.clone(), call.name.clone(), assistant.timestamp));
                }
                out.push(Message::Assistant(assistant));
            }
            Message::ToolResult(result) => {
                if !known_calls.contains(&result.tool_call_id) {
                    continue;
                }
                pending.retain(|(id, _, _)| id != &result.tool_call_id);
                out.push(message.clone());
            }
            Message::User(_) => {
                close_pending(&mut out, &mut pending);
                out.push(message.clone());
            }
        }
    }
    close_pending(&mut out, &mut pending);
    out
}

/// True when `message` was produced by exactly the target model.
pub fn same_model(message: &AssistantMessage, target: &ModelInfo) -> bool {
    message.api == target.api
        && message.provider == target.provider
        && message.model == target.model
}

fn close_pending(out: &mut Vec<Message>, pending: &mut Vec<(String, String, u64)>) {
    for (id, name, timestamp) in pending.drain(..) {
        out.push(Message::ToolResult(ToolResultMessage {
            tool_call_id: id,
            tool_name: name,
            content: vec![InputContent::Text(TextContent::new(MISSING_RESULT_TEXT))],
            details: None,
            is_error: true,
            timestamp,
            extra: Extra::new(),
        }));
    }
}

fn strip_for_other_model(message: &AssistantMessage) -> AssistantMessage {
    let mut message = message.clone();
    message.content = message
        .content
        .into_iter()
        .filter_map(|block| match block {
            AssistantContent::Text(mut text) => {
                text.text_signature = None;
                Some(AssistantContent::Text(text))
            }
            AssistantContent::Thinking(thinking) => {
                if thinking.redacted == Some(true) || thinking.thinking.trim().is_empty() {
                    None
                } else {
                    Some(AssistantContent::Text(TextContent::new(thinking.thinking)))
                }
            }
            AssistantContent::ToolCall(mut call) => {
                call.thought_signature = None;
                Some(AssistantContent::ToolCall(call))
            }
        })
        .collect();
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shiitake_protocol::message::{ThinkingContent, ToolCall, Usage, UserMessage};

    fn target() -> ModelInfo {
        ModelInfo::new("anthropic-messages", "anthropic", "claude")
    }

    fn assistant(content: Vec<AssistantContent>, stop: StopReason) -> AssistantMessage {
        AssistantMessage {
            content,
            api: "anthropic-messages".into(),
            provider: "anthropic".into(),
            model: "claude".into(),
            usage: Usage::default(),
            stop_reason: stop,
            error_message: None,
            timestamp: 5,
            extra: Extra::new(),
        }
    }

    fn call(id: &str) -> AssistantContent {
        AssistantContent::ToolCall(ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: serde_json::Map::new(),
            thought_signature: Some("sig".into()),
            extra: Extra::new(),
        })
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content: vec![InputContent::Text(TextContent::new("ok"))],
            details: None,
            is_error: false,
            timestamp: 6,
            extra: Extra::new(),
        })
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage::text(text, 1))
    }

    #[test]
    fn failed_and_aborted_messages_are_skipped_with_their_results() {
        let mut failed = assistant(vec![call("c1")], StopReason::Error);
        failed.error_message = Some("boom".into());
        let aborted = assistant(vec![], StopReason::Aborted);
        let messages = vec![
            user("hi"),
            Message::Assistant(failed),
            result("c1"),
            Message::Assistant(aborted),
            user("again"),
        ];
        assert_eq!(
            prepare(&messages, &target()),
            vec![user("hi"), user("again")]
        );
    }

    #[test]
    fn a_call_without_result_gets_a_synthetic_error_result() {
        let ask = assistant(vec![call("c1"), call("c2")], StopReason::ToolUse);
        let messages = vec![
            user("hi"),
            Message::Assistant(ask.clone()),
            result("c1"),
            user("next"),
        ];
        let prepared = prepare(&messages, &target());
        let synthetic = Message::ToolResult(ToolResultMessage {
            tool_call_id: "c2".into(),
            tool_name: "read".into(),
            content: vec![InputContent::Text(TextContent::new(MISSING_RESULT_TEXT))],
            details: None,
            is_error: true,
            timestamp: 5,
            extra: Extra::new(),
        });
        assert_eq!(
            prepared,
            vec![
                user("hi"),
                Message::Assistant(ask),
                result("c1"),
                synthetic,
                user("next")
            ]
        );
    }

    #[test]
    fn a_trailing_call_without_result_is_answered_too() {
        let ask = assistant(vec![call("c1")], StopReason::ToolUse);
        let prepared = prepare(&[user("hi"), Message::Assistant(ask)], &target());
        assert_eq!(prepared.len(), 3);
        assert!(
            matches!(&prepared[2], Message::ToolResult(r) if r.is_error && r.tool_call_id == "c1")
        );
    }

    #[test]
    fn same_model_keeps_signatures() {
        let mut thinking = ThinkingContent::new("let me see");
        thinking.thinking_signature = Some("abc".into());
        let message = assistant(
            vec![AssistantContent::Thinking(thinking), call("c1")],
            StopReason::ToolUse,
        );
        let messages = vec![
            user("hi"),
            Message::Assistant(message.clone()),
            result("c1"),
        ];
        assert_eq!(prepare(&messages, &target()), messages);
    }

    #[test]
    fn another_model_loses_signatures_and_thinking_becomes_text() {
        let mut thinking = ThinkingContent::new("let me see");
        thinking.thinking_signature = Some("abc".into());
        let mut redacted = ThinkingContent::new("");
        redacted.redacted = Some(true);
        redacted.thinking_signature = Some("opaque".into());
        let mut text = TextContent::new("answer");
        text.text_signature = Some("t".into());
        let message = assistant(
            vec![
                AssistantContent::Thinking(thinking),
                AssistantContent::Thinking(redacted),
                AssistantContent::Text(text),
                call("c1"),
            ],
            StopReason::ToolUse,
        );
        let other = ModelInfo::new("openai-completions", "openai", "gpt");
        let prepared = prepare(&[Message::Assistant(message), result("c1")], &other);
        let Message::Assistant(replayed) = &prepared[0] else {
            panic!("expected the assistant message first");
        };
        let encoded = serde_json::to_value(&replayed.content).unwrap();
        assert_eq!(
            encoded,
            json!([
                {"type": "text", "text": "let me see"},
                {"type": "text", "text": "answer"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}
            ])
        );
    }

    #[test]
    fn orphan_results_are_dropped() {
        assert_eq!(
            prepare(&[user("hi"), result("nobody")], &target()),
            vec![user("hi")]
        );
    }
}
