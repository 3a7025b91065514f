//! Decodes the Messages stream (`message_start` … `message_stop`).

use eventsource_stream::Event;
use serde_json::Value;
use shiitake_protocol::message::StopReason;

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::sse::{Decoder, Flow};

/// Streaming state: the stop reason once `message_delta` told it.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    stop: Option<StopReason>,
    refused: bool,
}

fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// Copies the usage fields present in `usage` into the message.
fn apply_usage(usage: &Value, out: &mut MessageBuilder) {
    let target = out.usage_mut();
    if let Some(n) = count(usage, "input_tokens") {
        target.input = n;
    }
    if let Some(n) = count(usage, "output_tokens") {
        target.output = n;
    }
    if let Some(n) = count(usage, "cache_read_input_tokens") {
        target.cache_read = n;
    }
    if let Some(n) = count(usage, "cache_creation_input_tokens") {
        target.cache_write = n;
    }
    out.recompute_total();
}

/// The error kind of an `error` event, so a first-event overload is retryable.
fn error_kind(kind: &str) -> ModelErrorKind {
    match kind {
        "overloaded_error" | "api_error" => ModelErrorKind::Server,
        "rate_limit_error" => ModelErrorKind::RateLimited,
        "authentication_error" | "permission_error" => ModelErrorKind::Unauthorized,
        "not_found_error" => ModelErrorKind::NotFound,
        "invalid_request_error" | "request_too_large" => ModelErrorKind::BadRequest,
        "timeout_error" => ModelErrorKind::Timeout,
        _ => ModelErrorKind::InvalidResponse,
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: &Event, out: &mut MessageBuilder) -> Result<Flow, ModelError> {
        if event.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|error| invalid(format!("unreadable event ({error}): {:.200}", event.data)))?;
        let kind = match text(&data, "type") {
            "" => event.event.as_str(),
            kind => kind,
        };
        match kind {
            "message_start" => {
                if let Some(usage) = data.get("message").and_then(|m| m.get("usage")) {
                    apply_usage(usage, out);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                match text(block, "type") {
                    "text" => {
                        out.start_text();
                        out.text(text(block, "text"));
                    }
                    "thinking" => {
                        out.start_thinking();
                        out.thinking(text(block, "thinking"));
                        out.thinking_signature(text(block, "signature"));
                    }
                    "redacted_thinking" => out.redacted_thinking(text(block, "data")),
                    "tool_use" => {
                        out.start_tool_call(text(block, "id"), text(block, "name"));
                        // Usually `{}` with the arguments in deltas; some proxies send them here.
                        if let Some(input) = block.get("input").and_then(Value::as_object)
                            && !input.is_empty()
                        {
                            out.tool_call_arguments(&Value::Object(input.clone()).to_string());
                        }
                    }
                    other => return Err(invalid(format!("unknown content block type `{other}`"))),
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match text(delta, "type") {
                    "text_delta" => out.text(text(delta, "text")),
                    "thinking_delta" => out.thinking(text(delta, "thinking")),
                    "signature_delta" => out.thinking_signature(text(delta, "signature")),
                    "input_json_delta" => {
                        let appended = out.tool_call_arguments(text(delta, "partial_json"));
                        if !appended {
                            return Err(invalid("input_json_delta outside a tool_use block"));
                        }
                    }
                    // Citations and future delta kinds carry nothing this message keeps.
                    _ => {}
                }
            }
            "content_block_stop" => out.close(),
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.refused = reason == "refusal";
                    self.stop = Some(match reason {
                        "max_tokens" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        _ => StopReason::Stop,
                    });
                }
                if let Some(usage) = data.get("usage") {
                    apply_usage(usage, out);
                }
            }
            "message_stop" => {
                if self.refused {
                    return Err(invalid(
                        "the model refused to answer (stop_reason `refusal`)",
                    ));
                }
                out.set_stop_reason(self.stop.unwrap_or(StopReason::Stop));
                return Ok(Flow::Finished);
            }
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
                let message = match text(error, "message") {
                    "" => event.data.clone(),
                    message => format!("{}: {message}", text(error, "type")),
                };
                return Err(ModelError::new(error_kind(text(error, "type")), message));
            }
            // `ping` and unknown events keep the stream alive.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn end(&mut self, _out: &mut MessageBuilder) -> Result<(), ModelError> {
        Err(invalid("the stream was cut before message_stop"))
    }
}
