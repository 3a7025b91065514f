//! Encodes a [`ModelContext`] as an OpenAI chat completions request body.

use serde_json::{Map, Value, json};
use shiitake_protocol::message::{
    AssistantContent, InputContent, Message, ToolResultMessage, UserContent,
};

use crate::model::{ModelContext, ModelInfo, ModelOptions, ReasoningLevel, ToolChoice};
use crate::replay;

/// The JSON body of `POST {base}/chat/completions`: streaming with usage, or
/// (`stream` false) one whole answer, which carries its usage anyway.
pub(crate) fn body(
    info: &ModelInfo,
    context: &ModelContext,
    options: &ModelOptions,
    max_tokens_field: &str,
    stream: bool,
) -> Value {
    let mut messages = Vec::new();
    if !context.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": context.system_prompt}));
    }
    for message in replay::prepare(&context.messages, info) {
        messages.push(match &message {
            Message::User(user) => json!({"role": "user", "content": user_content(&user.content)}),
            Message::Assistant(assistant) => {
                let mut text = String::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => text.push_str(&t.text),
                        // Chat completions has no way to send reasoning back.
                        AssistantContent::Thinking(_) => {}
                        AssistantContent::ToolCall(call) => calls.push(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": Value::Object(call.arguments.clone()).to_string(),
                            },
                        })),
                    }
                }
                // `content: null` next to tool calls is refused by some servers: send "".
                let mut entry = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    entry["tool_calls"] = Value::Array(calls);
                }
                entry
            }
            Message::ToolResult(result) => tool_result(result),
        });
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(info.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(max_tokens) = options.max_tokens {
        body.insert(max_tokens_field.into(), json!(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(level) = options.reasoning {
        let effort = match level {
            ReasoningLevel::Minimal => "minimal",
            ReasoningLevel::Low => "low",
            ReasoningLevel::Medium => "medium",
            ReasoningLevel::High => "high",
        };
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if !context.tools.is_empty() {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &options.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
    }
    Value::Object(body)
}

fn user_content(content: &UserContent) -> Value {
    match content {
        UserContent::Text(text) => json!(text),
        UserContent::Blocks(blocks) => Value::Array(
            blocks
                .iter()
                .map(|block| match block {
                    InputContent::Text(text) => json!({"type": "text", "text": text.text}),
                    InputContent::Image(image) => json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{};base64,{}", image.mime_type, image.data)},
                    }),
                })
                .collect(),
        ),
    }
}

/// Tool messages carry text only; images are named so the model knows they existed.
fn tool_result(result: &ToolResultMessage) -> Value {
    let text: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            InputContent::Text(text) => text.text.clone(),
            InputContent::Image(image) => format!("[image: {}]", image.mime_type),
        })
        .collect();
    json!({"role": "tool", "tool_call_id": result.tool_call_id, "content": text.join("\n")})
}
