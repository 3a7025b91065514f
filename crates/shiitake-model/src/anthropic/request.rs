//! Encodes a [`ModelContext`] as an Anthropic Messages request body.

use serde_json::{Map, Value, json};
use shiitake_protocol::message::{AssistantContent, InputContent, Message, UserContent};

use crate::model::{ModelContext, ModelInfo, ModelOptions, ReasoningLevel, ToolChoice};
use crate::replay;

/// Output limit when the caller sets none (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The `cache_control` that ends the stable prefix (the default five-minute cache).
fn cache_breakpoint() -> Value {
    json!({"type": "ephemeral"})
}

/// The thinking budget for a reasoning level, as pi-ai chooses it.
fn thinking_budget(level: ReasoningLevel) -> u32 {
    match level {
        ReasoningLevel::Minimal => 1024,
        ReasoningLevel::Low => 2048,
        ReasoningLevel::Medium => 8192,
        ReasoningLevel::High => 16384,
    }
}

/// The JSON body of `POST {base}/v1/messages` with `stream: true`.
pub(crate) fn body(info: &ModelInfo, context: &ModelContext, options: &ModelOptions) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in replay::prepare(&context.messages, info) {
        let (role, blocks) = match &message {
            Message::User(user) => ("user", user_blocks(&user.content)),
            Message::Assistant(assistant) => (
                "assistant",
                assistant
                    .content
                    .iter()
                    .filter_map(assistant_block)
                    .collect(),
            ),
            Message::ToolResult(result) => {
                let content: Vec<Value> = result.content.iter().map(input_block).collect();
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": content,
                });
                if result.is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        // The API wants alternating roles: tool results and a following prompt share one turn.
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();

    let mut max_tokens = options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = Map::new();
    body.insert("model".into(), json!(info.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    // The tools and the system prompt are the same on every call of a run and across
    // runs: one cache breakpoint at their end lets later calls read them from the
    // prompt cache (Anthropic caches tools, then system, then messages, in that order).
    let cached_system = !context.system_prompt.is_empty();
    if cached_system {
        body.insert(
            "system".into(),
            json!([{
                "type": "text",
                "text": context.system_prompt,
                "cache_control": cache_breakpoint(),
            }]),
        );
    }
    match options.reasoning {
        Some(level) => {
            // Thinking needs the default temperature, and room beyond its budget.
            let budget = thinking_budget(level);
            max_tokens = max_tokens.saturating_add(budget);
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        None => {
            if let Some(temperature) = options.temperature {
                body.insert("temperature".into(), json!(temperature));
            }
        }
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    if !context.tools.is_empty() {
        let mut tools: Vec<Value> = context
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        // Without a system prompt the stable prefix ends with the last tool.
        if !cached_system && let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_breakpoint();
        }
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &options.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
        body.insert("tool_choice".into(), choice);
    }
    Value::Object(body)
}

fn user_blocks(content: &UserContent) -> Vec<Value> {
    match content {
        UserContent::Text(text) if text.is_empty() => Vec::new(),
        UserContent::Text(text) => vec![json!({"type": "text", "text": text})],
        UserContent::Blocks(blocks) => blocks.iter().map(input_block).collect(),
    }
}

fn input_block(block: &InputContent) -> Value {
    match block {
        InputContent::Text(text) => json!({"type": "text", "text": text.text}),
        InputContent::Image(image) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
        }),
    }
}

/// One assistant block on the wire; empty text is refused by the API, so it is left out.
fn assistant_block(block: &AssistantContent) -> Option<Value> {
    match block {
        AssistantContent::Text(text) if text.text.is_empty() => None,
        AssistantContent::Text(text) => Some(json!({"type": "text", "text": text.text})),
        AssistantContent::Thinking(thinking) => {
            match (&thinking.thinking_signature, thinking.redacted) {
                (Some(data), Some(true)) => {
                    Some(json!({"type": "redacted_thinking", "data": data}))
                }
                (Some(signature), _) => Some(json!({
                    "type": "thinking",
                    "thinking": thinking.thinking,
                    "signature": signature,
                })),
                // Unsigned thinking cannot be replayed as thinking: send it as text.
                (None, _) if thinking.thinking.trim().is_empty() => None,
                (None, _) => Some(json!({"type": "text", "text": thinking.thinking})),
            }
        }
        AssistantContent::ToolCall(call) => Some(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": Value::Object(call.arguments.clone()),
        })),
    }
}
