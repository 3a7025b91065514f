//! Encoders: a scripted [`Turn`] as the SSE a real OpenAI or Anthropic server would send.
//!
//! The shared behaviour suite plays the same turns through the scripted model
//! and through both providers against the test server, so all three must agree.

use serde_json::{Value, json};
use shiitake_model::scripted::{Step, Turn};

use super::server::{Part, Reply};

/// Which wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The failure a turn starts with, as an HTTP error reply.
fn failure(turn: &Turn, wire: Wire) -> Option<Reply> {
    let mut delay = 0;
    for step in &turn.steps {
        match step {
            Step::DelayMs(ms) => delay += ms,
            Step::Fail(failure) => {
                let message = failure
                    .message
                    .clone()
                    .unwrap_or_else(|| "scripted failure".into());
                let body = match wire {
                    Wire::OpenAi => json!({"error": {"message": message, "type": "server_error"}}),
                    Wire::Anthropic => {
                        json!({"type": "error", "error": {"type": "api_error", "message": message}})
                    }
                };
                let mut reply = Reply::error(failure.status, body);
                if delay > 0 {
                    reply
                        .parts
                        .insert(0, super::server::Part::DelayHeaders(delay));
                }
                if let Some(ms) = failure.retry_after_ms {
                    reply = reply.header("retry-after", &(ms / 1000).to_string());
                }
                return Some(reply);
            }
            _ => return None,
        }
    }
    None
}

/// Encodes `turn` in `wire` format, splitting every text into pieces of `split` chars.
pub fn reply(wire: Wire, turn: &Turn, split: usize) -> Reply {
    if let Some(reply) = failure(turn, wire) {
        return reply;
    }
    // Leading delays come before the first event, like a server still prefilling.
    let leading: Vec<u64> = turn
        .steps
        .iter()
        .map_while(|s| match s {
            Step::DelayMs(ms) => Some(*ms),
            _ => None,
        })
        .collect();
    let rest = Turn {
        steps: turn.steps[leading.len()..].to_vec(),
        stop_reason: turn.stop_reason,
    };
    let mut reply = match wire {
        Wire::OpenAi => openai(&rest, split),
        Wire::Anthropic => anthropic(&rest, split),
    };
    for ms in leading.into_iter().rev() {
        reply.parts.insert(0, Part::Wait(ms));
    }
    reply
}

fn data(value: Value) -> Part {
    Part::Data(format!("data: {value}\n\n"))
}

fn openai_chunk(delta: Value) -> Part {
    data(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
    )
}

/// OpenAI chat completion chunks.
pub fn openai(turn: &Turn, split: usize) -> Reply {
    let mut parts = vec![openai_chunk(json!({"role": "assistant", "content": ""}))];
    let mut calls = 0;
    for step in &turn.steps {
        match step {
            Step::Text(text) => {
                for piece in pieces(text, split) {
                    parts.push(openai_chunk(json!({"content": piece})));
                }
            }
            Step::Thinking(text) => {
                for piece in pieces(text, split) {
                    parts.push(openai_chunk(json!({"reasoning_content": piece})));
                }
            }
            Step::ToolCall(call) => {
                let id = call.id.clone().unwrap_or_else(|| format!("call_{calls}"));
                let arguments = Value::Object(call.arguments.clone()).to_string();
                parts.push(openai_chunk(
                    json!({"tool_calls": [{"index": calls, "id": id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}}]}),
                ));
                for piece in pieces(&arguments, split) {
                    parts.push(openai_chunk(json!({"tool_calls": [{"index": calls,
                        "function": {"arguments": piece}}]})));
                }
                calls += 1;
            }
            Step::DelayMs(ms) => parts.push(Part::Wait(*ms)),
            Step::Cut(_) => return Reply::sse(parts),
            Step::Fail(_) | Step::Echo => panic!("not encodable on the wire: {step:?}"),
        }
    }
    let finish = match turn.stop_reason {
        Some(shiitake_protocol::message::StopReason::Length) => "length",
        _ if calls > 0 => "tool_calls",
        _ => "stop",
    };
    parts.push(data(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    ));
    parts.push(data(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}),
    ));
    parts.push(Part::Data("data: [DONE]\n\n".into()));
    Reply::sse(parts)
}

fn event(name: &str, value: Value) -> Part {
    Part::Data(format!("event: {name}\ndata: {value}\n\n"))
}

/// Anthropic Messages stream events.
pub fn anthropic(turn: &Turn, split: usize) -> Reply {
    let mut parts = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}}}),
    )];
    let mut index = 0;
    let mut calls = 0;
    for step in &turn.steps {
        let block = |parts: &mut Vec<Part>, start: Value, deltas: Vec<Value>, index: usize| {
            parts.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            for delta in deltas {
                parts.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            parts.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        };
        match step {
            Step::Text(text) => {
                let deltas = pieces(text, split)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect();
                block(
                    &mut parts,
                    json!({"type": "text", "text": ""}),
                    deltas,
                    index,
                );
                index += 1;
            }
            Step::Thinking(text) => {
                let mut deltas: Vec<Value> = pieces(text, split)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .collect();
                deltas
                    .push(json!({"type": "signature_delta", "signature": format!("sig-{index}")}));
                block(
                    &mut parts,
                    json!({"type": "thinking", "thinking": ""}),
                    deltas,
                    index,
                );
                index += 1;
            }
            Step::ToolCall(call) => {
                let id = call.id.clone().unwrap_or_else(|| format!("toolu_{calls}"));
                let arguments = Value::Object(call.arguments.clone()).to_string();
                let deltas = pieces(&arguments, split)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect();
                block(
                    &mut parts,
                    json!({"type": "tool_use", "id": id, "name": call.name, "input": {}}),
                    deltas,
                    index,
                );
                index += 1;
                calls += 1;
            }
            Step::DelayMs(ms) => parts.push(Part::Wait(*ms)),
            Step::Cut(_) => return Reply::sse(parts),
            Step::Fail(_) | Step::Echo => panic!("not encodable on the wire: {step:?}"),
        }
    }
    let stop = match turn.stop_reason {
        Some(shiitake_protocol::message::StopReason::Length) => "max_tokens",
        _ if calls > 0 => "tool_use",
        _ => "end_turn",
    };
    parts.push(event(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    ));
    parts.push(event("message_stop", json!({"type": "message_stop"})));
    Reply::sse(parts)
}

/// The same turn as one whole chat completion (`stream: false`): thinking, then
/// text, then tool calls, as `choices[0].message`; a leading delay holds the headers.
pub fn openai_whole(turn: &Turn) -> Reply {
    let mut reasoning = String::new();
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut delay = 0;
    for step in &turn.steps {
        match step {
            Step::Text(text) => content.push_str(text),
            Step::Thinking(text) => reasoning.push_str(text),
            Step::ToolCall(call) => {
                let id = call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}", calls.len()));
                calls.push(json!({"id": id, "type": "function", "function": {
                    "name": call.name,
                    "arguments": Value::Object(call.arguments.clone()).to_string()}}));
            }
            Step::DelayMs(ms) => delay += ms,
            Step::Fail(_) | Step::Cut(_) | Step::Echo => {
                panic!("not encodable as a whole answer: {step:?}")
            }
        }
    }
    let finish = match turn.stop_reason {
        Some(shiitake_protocol::message::StopReason::Length) => "length",
        _ if !calls.is_empty() => "tool_calls",
        _ => "stop",
    };
    let mut message = json!({"role": "assistant",
        "content": if content.is_empty() { Value::Null } else { json!(content) }});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let mut reply = Reply::error(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}),
    );
    if delay > 0 {
        reply.parts.insert(0, Part::DelayHeaders(delay));
    }
    reply
}
