//! Decodes chat completion chunks (`data: {...}` … `data: [DONE]`).

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::Value;
use shiitake_protocol::message::{StopReason, Usage};

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::http::{error_message, error_message_from_body};
use crate::sse::{Decoder, Flow};

#[derive(Deserialize)]
struct Chunk {
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
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Token counts as OpenAI reports them, streamed or whole.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

/// Streaming state: which wire tool-call index is open, and whether the model finished.
#[derive(Default)]
pub(crate) struct OpenAiDecoder {
    /// Wire index and id of the open tool call.
    open_call: Option<(usize, Option<String>)>,
    /// Wire indices already closed, to detect interleaving.
    closed_calls: Vec<usize>,
    finish: Option<String>,
}

impl OpenAiDecoder {
    fn tool_call(
        &mut self,
        position: usize,
        delta: ToolCallDelta,
        out: &mut MessageBuilder,
    ) -> Result<(), ModelError> {
        let index = delta.index.unwrap_or(position);
        let function = delta.function.unwrap_or(FunctionDelta {
            name: None,
            arguments: None,
        });
        let continues = match &self.open_call {
            Some((open, open_id)) => {
                *open == index
                    && match (&delta.id, open_id) {
                        (Some(new), Some(old)) => new == old,
                        _ => true,
                    }
            }
            None => false,
        };
        if !continues {
            if self.closed_calls.contains(&index) && delta.id.is_none() {
                return Err(invalid(format!(
                    "tool call {index} continued after another began"
                )));
            }
            if let Some((open, _)) = self.open_call.take() {
                self.closed_calls.push(open);
            }
            let id = delta.id.clone().unwrap_or_else(|| format!("call_{index}"));
            let name = function.name.clone().unwrap_or_default();
            if name.is_empty() {
                return Err(invalid(format!("tool call {index} began without a name")));
            }
            out.start_tool_call(&id, &name);
            self.open_call = Some((index, delta.id));
        }
        let arguments = match function.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            // Some servers send the arguments object itself.
            Some(other) => other.to_string(),
        };
        out.tool_call_arguments(&arguments);
        Ok(())
    }
}

pub(super) fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

/// The stop reason a `finish_reason` names; the content filter is an error.
pub(super) fn stop_reason(finish: &str) -> Result<StopReason, ModelError> {
    match finish {
        "length" => Ok(StopReason::Length),
        "tool_calls" | "function_call" => Ok(StopReason::ToolUse),
        "content_filter" => Err(ModelError::new(
            ModelErrorKind::InvalidResponse,
            "the provider's content filter stopped the answer",
        )),
        _ => Ok(StopReason::Stop),
    }
}

/// Records usage, counting cached prompt tokens as `cacheRead`.
pub(super) fn set_usage(out: &mut MessageBuilder, usage: WireUsage) {
    let cached = usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens);
    out.set_usage(Usage {
        input: usage.prompt_tokens.saturating_sub(cached),
        output: usage.completion_tokens,
        cache_read: cached,
        ..Usage::default()
    });
    out.recompute_total();
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, event: &Event, out: &mut MessageBuilder) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        if data == "[DONE]" {
            return match self.finish.take() {
                Some(finish) => {
                    out.set_stop_reason(stop_reason(&finish)?);
                    Ok(Flow::Finished)
                }
                None => Err(invalid("the stream ended ([DONE]) without a finish_reason")),
            };
        }
        if event.event == "error" {
            let message = error_message_from_body(data).unwrap_or_else(|| data.to_owned());
            return Err(ModelError::new(ModelErrorKind::Server, message));
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|error| invalid(format!("unreadable chunk ({error}): {data:.200}")))?;
        if let Some(error) = chunk.error {
            let message = error_message(&serde_json::json!({"error": error}))
                .unwrap_or_else(|| error.to_string());
            return Err(ModelError::new(ModelErrorKind::Server, message));
        }
        if let Some(usage) = chunk.usage {
            set_usage(out, usage);
        }
        for choice in chunk.choices.into_iter().take(1) {
            let delta = choice.delta.unwrap_or_default();
            let reasoning = delta.reasoning_content.or(delta.reasoning);
            if let Some(reasoning) = reasoning {
                out.thinking(&reasoning);
            }
            if let Some(content) = delta.content {
                out.text(&content);
            }
            for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                self.tool_call(position, call, out)?;
            }
            if let Some(finish) = choice.finish_reason {
                self.finish = Some(finish);
            }
        }
        Ok(Flow::Continue)
    }

    fn end(&mut self, out: &mut MessageBuilder) -> Result<(), ModelError> {
        // Some servers omit `[DONE]`; a finish_reason is the real end of the answer.
        match self.finish.take() {
            Some(finish) => {
                out.set_stop_reason(stop_reason(&finish)?);
                Ok(())
            }
            None => Err(invalid(
                "the stream was cut before the model finished (no finish_reason)",
            )),
        }
    }
}
