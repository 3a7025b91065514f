//! Assembles one assistant message from provider-neutral pieces and emits its events.
//!
//! Every model (both providers and the scripted model) drives a
//! [`MessageBuilder`], so the event grammar (`start`, balanced block
//! start/end with `contentIndex`, exactly one terminal event) holds by
//! construction rather than by each provider's care.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, Extra, StopReason, TextContent, ThinkingContent, ToolCall,
    Usage, UsageSource,
};

use crate::event::AssistantEvent;
use crate::model::ModelInfo;

/// The block that is receiving deltas.
enum Open {
    Text,
    Thinking,
    ToolCall { arguments: String },
}

/// Builds one assistant message and queues the events that describe it.
pub(crate) struct MessageBuilder {
    message: AssistantMessage,
    open: Option<Open>,
    events: VecDeque<AssistantEvent>,
    finished: bool,
}

/// Milliseconds since the Unix epoch, for message timestamps.
pub(crate) fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl MessageBuilder {
    /// A builder with the `start` event queued.
    pub(crate) fn new(info: &ModelInfo) -> Self {
        let message = AssistantMessage {
            content: Vec::new(),
            api: info.api.clone(),
            provider: info.provider.clone(),
            model: info.model.clone(),
            // Unknown until the provider reports it: never a false zero.
            usage: Usage::unknown(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: now_millis(),
            extra: Extra::new(),
        };
        let mut events = VecDeque::new();
        events.push_back(AssistantEvent::Start);
        Self {
            message,
            open: None,
            events,
            finished: false,
        }
    }

    /// The next queued event.
    pub(crate) fn pop(&mut self) -> Option<AssistantEvent> {
        self.events.pop_front()
    }

    /// True once `done` or `error` has been queued.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    fn index(&self) -> usize {
        self.message.content.len().saturating_sub(1)
    }

    /// Appends visible text, opening a text block if needed.
    pub(crate) fn text(&mut self, delta: &str) {
        if delta.is_empty() || self.finished {
            return;
        }
        if !matches!(self.open, Some(Open::Text)) {
            self.start_text();
        }
        let content_index = self.index();
        if let Some(AssistantContent::Text(block)) = self.message.content.last_mut() {
            block.text.push_str(delta);
        }
        self.events.push_back(AssistantEvent::TextDelta {
            content_index,
            delta: delta.to_owned(),
        });
    }

    /// Opens a new (empty) text block even if one is open.
    pub(crate) fn start_text(&mut self) {
        if self.finished {
            return;
        }
        self.close();
        self.message
            .content
            .push(AssistantContent::Text(TextContent::new("")));
        self.open = Some(Open::Text);
        self.events.push_back(AssistantEvent::TextStart {
            content_index: self.index(),
        });
    }

    /// Appends reasoning, opening a thinking block if needed.
    pub(crate) fn thinking(&mut self, delta: &str) {
        if delta.is_empty() || self.finished {
            return;
        }
        if !matches!(self.open, Some(Open::Thinking)) {
            self.start_thinking();
        }
        let content_index = self.index();
        if let Some(AssistantContent::Thinking(block)) = self.message.content.last_mut() {
            block.thinking.push_str(delta);
        }
        self.events.push_back(AssistantEvent::ThinkingDelta {
            content_index,
            delta: delta.to_owned(),
        });
    }

    /// Opens a new (empty) thinking block even if one is open.
    pub(crate) fn start_thinking(&mut self) {
        if self.finished {
            return;
        }
        self.close();
        self.message
            .content
            .push(AssistantContent::Thinking(ThinkingContent::new("")));
        self.open = Some(Open::Thinking);
        self.events.push_back(AssistantEvent::ThinkingStart {
            content_index: self.index(),
        });
    }

    /// Appends to the signature of the open thinking block (Anthropic's `signature_delta`).
    pub(crate) fn thinking_signature(&mut self, piece: &str) {
        if !matches!(self.open, Some(Open::Thinking)) {
            return;
        }
        if let Some(AssistantContent::Thinking(block)) = self.message.content.last_mut() {
            block
                .thinking_signature
                .get_or_insert_with(String::new)
                .push_str(piece);
        }
    }

    /// Adds a complete redacted thinking block whose payload is kept as its signature.
    pub(crate) fn redacted_thinking(&mut self, data: &str) {
        if self.finished {
            return;
        }
        self.start_thinking();
        if let Some(AssistantContent::Thinking(block)) = self.message.content.last_mut() {
            block.redacted = Some(true);
            block.thinking_signature = Some(data.to_owned());
        }
        self.close();
    }

    /// Opens a tool call block.
    pub(crate) fn start_tool_call(&mut self, id: &str, name: &str) {
        if self.finished {
            return;
        }
        self.close();
        self.message
            .content
            .push(AssistantContent::ToolCall(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: Map::new(),
                thought_signature: None,
                extra: Extra::new(),
            }));
        self.open = Some(Open::ToolCall {
            arguments: String::new(),
        });
        self.events.push_back(AssistantEvent::ToolcallStart {
            content_index: self.index(),
            id: id.to_owned(),
            name: name.to_owned(),
        });
    }

    /// Appends raw JSON to the open tool call's arguments; false when no tool call is open.
    pub(crate) fn tool_call_arguments(&mut self, delta: &str) -> bool {
        let content_index = self.index();
        let Some(Open::ToolCall { arguments }) = self.open.as_mut() else {
            return false;
        };
        if !delta.is_empty() {
            arguments.push_str(delta);
            self.events.push_back(AssistantEvent::ToolcallDelta {
                content_index,
                delta: delta.to_owned(),
            });
        }
        true
    }

    /// Closes the open block, emitting its `*_end` event; an invalid tool call is an error.
    pub(crate) fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let content_index = self.index();
        let Some(block) = self.message.content.last_mut() else {
            return;
        };
        match (open, block) {
            (Open::Text, AssistantContent::Text(text)) => {
                self.events.push_back(AssistantEvent::TextEnd {
                    content_index,
                    content: text.text.clone(),
                })
            }
            (Open::Thinking, AssistantContent::Thinking(thinking)) => {
                self.events.push_back(AssistantEvent::ThinkingEnd {
                    content_index,
                    content: thinking.thinking.clone(),
                });
            }
            (Open::ToolCall { arguments }, AssistantContent::ToolCall(call)) => {
                match decode_arguments(&arguments) {
                    Ok(decoded) => {
                        call.arguments = decoded;
                        let tool_call = call.clone();
                        self.events.push_back(AssistantEvent::ToolcallEnd {
                            content_index,
                            tool_call,
                        });
                    }
                    Err(reason) => {
                        let message = format!(
                            "the arguments of tool call `{}` are not a JSON object: {reason}",
                            call.name
                        );
                        self.fail(StopReason::Error, message);
                    }
                }
            }
            _ => {}
        }
    }

    /// Replaces the usage with what the provider reported.
    pub(crate) fn set_usage(&mut self, usage: Usage) {
        self.message.usage = usage;
    }

    /// Mutable usage, for providers that report it in parts: from now on it is reported
    /// (a caller that estimates it says so in `source`).
    pub(crate) fn usage_mut(&mut self) -> &mut Usage {
        let usage = &mut self.message.usage;
        usage.source = UsageSource::Reported;
        usage
    }

    /// Sets why the message ended (a `stop` with tool calls becomes `toolUse` at finish).
    pub(crate) fn set_stop_reason(&mut self, reason: StopReason) {
        self.message.stop_reason = reason;
    }

    /// Completes the message and queues `done`.
    pub(crate) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.close();
        if self.finished {
            return;
        }
        if self.message.stop_reason == StopReason::Stop
            && self.message.tool_calls().next().is_some()
        {
            self.message.stop_reason = StopReason::ToolUse;
        }
        self.message.timestamp = now_millis();
        self.finished = true;
        let reason = self.message.stop_reason;
        self.events.push_back(AssistantEvent::Done {
            reason,
            message: self.message.clone(),
        });
    }

    /// Ends the message with `error` (or `aborted`), keeping the partial content.
    ///
    /// An unfinished tool call keeps the arguments decoded so far only if they
    /// are already valid JSON; no `*_end` event is sent for the open block.
    pub(crate) fn fail(&mut self, reason: StopReason, message: impl Into<String>) {
        if self.finished {
            return;
        }
        if let Some(Open::ToolCall { arguments }) = self.open.take()
            && let Some(AssistantContent::ToolCall(call)) = self.message.content.last_mut()
        {
            call.arguments = decode_arguments(&arguments).unwrap_or_default();
        }
        let reason = match reason {
            StopReason::Aborted => StopReason::Aborted,
            _ => StopReason::Error,
        };
        self.message.stop_reason = reason;
        self.message.error_message = Some(message.into());
        self.message.timestamp = now_millis();
        self.finished = true;
        self.events.push_back(AssistantEvent::Error {
            reason,
            error: self.message.clone(),
        });
    }

    /// Adds input token counts in the pi-ai way: `totalTokens` is the sum of the parts.
    pub(crate) fn recompute_total(&mut self) {
        let usage = &mut self.message.usage;
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
    }
}

/// Decodes accumulated tool call arguments; empty text means no arguments.
fn decode_arguments(raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("got {other}")),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ModelInfo {
        ModelInfo::new("test", "test", "m")
    }

    fn drain(builder: &mut MessageBuilder) -> Vec<AssistantEvent> {
        std::iter::from_fn(|| builder.pop()).collect()
    }

    #[test]
    fn blocks_get_indices_and_ends() {
        let mut b = MessageBuilder::new(&info());
        b.thinking("hm");
        b.text("Hel");
        b.text("lo");
        b.start_tool_call("c1", "read");
        b.tool_call_arguments("{\"pa");
        b.tool_call_arguments("th\":\"a\"}");
        b.finish();
        let names: Vec<_> = drain(&mut b).iter().map(AssistantEvent::name).collect();
        assert_eq!(
            names,
            [
                "start",
                "thinking_start",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_delta",
                "toolcall_end",
                "done"
            ]
        );
        assert_eq!(b.message.stop_reason, StopReason::ToolUse);
        assert_eq!(b.message.text(), "Hello");
    }

    #[test]
    fn usage_is_unknown_until_the_provider_reports_it() {
        let mut silent = MessageBuilder::new(&info());
        silent.text("hi");
        silent.finish();
        let Some(AssistantEvent::Done { message, .. }) = drain(&mut silent).pop() else {
            panic!("no done event")
        };
        assert_eq!(message.usage, Usage::unknown());
        let mut counted = MessageBuilder::new(&info());
        counted.usage_mut().output = 3;
        counted.recompute_total();
        assert_eq!(counted.message.usage.source, UsageSource::Reported);
        assert_eq!(counted.message.usage.total_tokens, 3);
    }

    #[test]
    fn invalid_arguments_fail_the_message() {
        let mut b = MessageBuilder::new(&info());
        b.start_tool_call("c1", "read");
        b.tool_call_arguments("{\"pa");
        b.finish();
        let last = drain(&mut b).pop();
        assert!(matches!(
            last,
            Some(AssistantEvent::Error {
                reason: StopReason::Error,
                ..
            })
        ));
    }

    #[test]
    fn fail_keeps_partial_content_and_ends_once() {
        let mut b = MessageBuilder::new(&info());
        b.text("par");
        b.fail(StopReason::Aborted, "aborted");
        b.fail(StopReason::Error, "again");
        b.finish();
        let events = drain(&mut b);
        let terminals: Vec<_> = events
            .iter()
            .filter_map(AssistantEvent::final_message)
            .collect();
        assert_eq!(terminals.len(), 1);
        assert_eq!(terminals[0].text(), "par");
        assert_eq!(terminals[0].stop_reason, StopReason::Aborted);
        assert_eq!(terminals[0].error_message.as_deref(), Some("aborted"));
    }
}
