//! A whole (non-streamed) chat completion, replayed as the events a stream gives.
//!
//! Used when [`ToolStreaming::NonStreamingReplay`](super::ToolStreaming) is set
//! and tools are offered: the server answers one JSON object
//! (`choices[0].message` with `content`, `reasoning_content` and `tool_calls`,
//! `finish_reason`, `usage`), and this module drives the same
//! [`MessageBuilder`] the streaming decoder drives. The runner cannot tell the
//! two apart: `start`, one block per piece of content, then `done`.
//!
//! Nothing arrives until the answer is complete, so every failure here (a cut
//! body, an oversized or unreadable answer, cancellation) is an `Err` before
//! streaming, classified like any other.

use futures::StreamExt;
use futures::stream;
use reqwest::Response;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::decode::{WireUsage, invalid, set_usage, stop_reason};
use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::http::{aborted, error_message, transport_error};
use crate::model::AssistantStream;

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireCall>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Reads the whole answer (at most `max_bytes`) and returns it as a finished event stream.
pub(super) async fn replay(
    response: Response,
    mut builder: MessageBuilder,
    cancel: &CancellationToken,
    max_bytes: usize,
) -> Result<AssistantStream, ModelError> {
    let body = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(aborted()),
        body = read_bounded(response, max_bytes) => body?,
    };
    apply(&body, &mut builder)?;
    builder.finish();
    let events: Vec<_> = std::iter::from_fn(|| builder.pop()).collect();
    Ok(stream::iter(events).boxed())
}

async fn read_bounded(response: Response, max_bytes: usize) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| transport_error(&error))?;
        if body.len() + chunk.len() > max_bytes {
            return Err(invalid(format!("the answer exceeded {max_bytes} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Feeds a whole completion to the builder, in the order a stream would deliver it.
fn apply(body: &[u8], out: &mut MessageBuilder) -> Result<(), ModelError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("the server answered 200 with an empty body"));
    }
    let completion: Completion = serde_json::from_slice(body).map_err(|error| {
        invalid(format!(
            "unreadable completion ({error}): {:.200}",
            String::from_utf8_lossy(body)
        ))
    })?;
    if let Some(error) = completion.error {
        let message = error_message(&serde_json::json!({"error": error}))
            .unwrap_or_else(|| error.to_string());
        return Err(ModelError::new(ModelErrorKind::Server, message));
    }
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(invalid("the completion has no choices"));
    };
    let finish = choice
        .finish_reason
        .ok_or_else(|| invalid("the completion has no finish_reason"))?;
    let message = choice
        .message
        .ok_or_else(|| invalid("the completion has no message"))?;
    if let Some(reasoning) = message.reasoning_content.or(message.reasoning) {
        out.thinking(&reasoning);
    }
    if let Some(content) = message.content {
        out.text(&content);
    }
    for (index, call) in message.tool_calls.into_iter().enumerate() {
        if call.function.name.is_empty() {
            return Err(invalid(format!("tool call {index} has no name")));
        }
        let id = call.id.unwrap_or_else(|| format!("call_{index}"));
        out.start_tool_call(&id, &call.function.name);
        let arguments = match call.function.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            // Some servers send the arguments object itself.
            Some(other) => other.to_string(),
        };
        out.tool_call_arguments(&arguments);
    }
    if let Some(usage) = completion.usage {
        set_usage(out, usage);
    }
    out.set_stop_reason(stop_reason(&finish)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::AssistantEvent;
    use crate::model::ModelInfo;
    use shiitake_protocol::message::StopReason;

    fn events(body: &str) -> Result<Vec<AssistantEvent>, ModelError> {
        let mut builder = MessageBuilder::new(&ModelInfo::new("a", "p", "m"));
        apply(body.as_bytes(), &mut builder)?;
        builder.finish();
        Ok(std::iter::from_fn(|| builder.pop()).collect())
    }

    #[test]
    fn a_tool_call_answer_replays_as_the_streamed_events() {
        let body = r#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{
            "role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function",
            "function":{"name":"files__read","arguments":"{\"path\":\"notes.txt\"}"}}]}}],
            "usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}"#;
        let events = events(body).unwrap();
        let names: Vec<_> = events.iter().map(AssistantEvent::name).collect();
        assert_eq!(
            names,
            [
                "start",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_end",
                "done"
            ]
        );
        let Some(AssistantEvent::Done { reason, message }) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(*reason, StopReason::ToolUse);
        assert_eq!(message.usage.total_tokens, 14);
        let call = message.tool_calls().next().unwrap();
        assert_eq!(
            (call.id.as_str(), call.name.as_str()),
            ("call_9", "files__read")
        );
        assert_eq!(call.arguments["path"], "notes.txt");
    }

    #[test]
    fn an_answer_without_usage_records_it_as_unknown() {
        let body = r#"{"choices":[{"index":0,"finish_reason":"stop",
            "message":{"role":"assistant","content":"hi"}}]}"#;
        let events = events(body).unwrap();
        let Some(AssistantEvent::Done { message, .. }) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(message.usage, shiitake_protocol::message::Usage::unknown());
    }

    #[test]
    fn missing_pieces_are_invalid_responses() {
        for body in [
            "",
            "  \n",
            "not json",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":{"content":"hi"}}]}"#,
            r#"{"choices":[{"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[{"function":{"name":""}}]}}]}"#,
        ] {
            let error = events(body).unwrap_err();
            assert_eq!(error.kind(), ModelErrorKind::InvalidResponse, "{body:?}");
        }
        let error = events(r#"{"error":{"message":"model crashed"}}"#).unwrap_err();
        assert_eq!(error.kind(), ModelErrorKind::Server);
        assert!(error.to_string().contains("model crashed"), "{error}");
    }
}
