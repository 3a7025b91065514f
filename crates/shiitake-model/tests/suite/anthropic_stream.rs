//! The Anthropic Messages provider against the recording test server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use shiitake_model::scripted::Turn;
use shiitake_model::{
    Anthropic, AnthropicConfig, Model, ModelContext, ModelErrorKind, ModelOptions, ReasoningLevel,
    Step, ToolChoice, ToolSpec,
};
use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, InputContent, Message, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, Usage, UserMessage,
};
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call};
use crate::support::server::{Part, Reply, TestServer};
use crate::support::wire;

fn provider(server: &TestServer) -> Anthropic {
    Anthropic::new(
        AnthropicConfig::new("claude-test", "sk-ant-test")
            .base_url(&server.base)
            .header("anthropic-beta", "test-beta"),
    )
    .unwrap()
}

fn event(name: &str, data: Value) -> Part {
    Part::Data(format!("event: {name}\ndata: {data}\n\n"))
}

fn start(usage: Value) -> Part {
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
        "role": "assistant", "content": [], "usage": usage}}),
    )
}

fn end(reason: &str) -> Vec<Part> {
    vec![
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason},
            "usage": {"output_tokens": 9}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
}

fn tool_call(id: &str, arguments: Value) -> AssistantContent {
    let Value::Object(arguments) = arguments else {
        panic!("object")
    };
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: "read".into(),
        arguments,
        thought_signature: None,
        extra: Default::default(),
    })
}

fn result(id: &str, text: &str, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "read".into(),
        content: vec![InputContent::Text(TextContent::new(text))],
        details: None,
        is_error,
        timestamp: 4,
        extra: Default::default(),
    })
}

#[tokio::test]
async fn the_request_carries_headers_tools_thinking_and_merged_tool_results() {
    let server = TestServer::start(vec![wire::anthropic(&Turn::text("ok"), 4)]).await;
    let model = provider(&server);
    let mut thinking = ThinkingContent::new("I should read both.");
    thinking.thinking_signature = Some("sig-1".into());
    let mut redacted = ThinkingContent::new("");
    redacted.redacted = Some(true);
    redacted.thinking_signature = Some("opaque".into());
    let assistant = AssistantMessage {
        content: vec![
            AssistantContent::Thinking(thinking),
            AssistantContent::Thinking(redacted),
            AssistantContent::Text(TextContent::new("")),
            tool_call("t1", json!({"path": "a"})),
            tool_call("t2", json!({"path": "b"})),
        ],
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        model: "claude-test".into(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 3,
        extra: Default::default(),
    };
    let context = ModelContext {
        system_prompt: "Be terse.".into(),
        messages: vec![
            Message::User(UserMessage::text("read a and b", 1)),
            Message::Assistant(assistant),
            result("t1", "A", false),
            Message::User(UserMessage::text("and hurry", 5)),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
    };
    let options = ModelOptions {
        max_tokens: Some(1000),
        temperature: Some(0.2),
        reasoning: Some(ReasoningLevel::Low),
        tool_choice: ToolChoice::Auto,
    };
    call(&model, context, options).await.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], "sk-ant-test");
    assert_eq!(request.headers["anthropic-version"], "2023-06-01");
    assert_eq!(request.headers["anthropic-beta"], "test-beta");
    let expected = json!({
        "model": "claude-test",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should read both.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "A"}]},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                 "content": [{"type": "text", "text": shiitake_model::replay::MISSING_RESULT_TEXT}]},
                {"type": "text", "text": "and hurry"}
            ]}
        ],
        "stream": true,
        "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "max_tokens": 3048,
        "tools": [{"name": "read", "description": "Read a file.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "tool_choice": {"type": "auto"}
    });
    assert_eq!(request.body, expected);
}

#[tokio::test]
async fn without_a_system_prompt_the_cache_breakpoint_ends_the_tools() {
    let mut parts = vec![start(json!({"input_tokens": 3}))];
    parts.extend(end("end_turn"));
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let tool = |name: &str| ToolSpec {
        name: name.into(),
        description: "A tool.".into(),
        parameters: json!({"type": "object"}),
    };
    let mut context = ask("hi");
    context.system_prompt.clear();
    context.tools = vec![tool("first"), tool("last")];
    call(&provider(&server), context, ModelOptions::default())
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert!(body.get("system").is_none(), "{body}");
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn thinking_signatures_redacted_thinking_and_cache_usage_are_read() {
    let parts = vec![
        start(
            json!({"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 200,
            "cache_creation_input_tokens": 30}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "SIG"}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "ENCRYPTED"}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        event("ping", json!({"type": "ping"})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "text_delta", "text": "done"}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
    ];
    let parts = parts.into_iter().chain(end("max_tokens")).collect();
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    let AssistantContent::Thinking(signed) = &message.content[0] else {
        panic!("{message:?}")
    };
    assert_eq!(
        (
            signed.thinking.as_str(),
            signed.thinking_signature.as_deref()
        ),
        ("hmm", Some("SIG"))
    );
    let AssistantContent::Thinking(redacted) = &message.content[1] else {
        panic!("{message:?}")
    };
    assert_eq!(
        (redacted.redacted, redacted.thinking_signature.as_deref()),
        (Some(true), Some("ENCRYPTED"))
    );
    assert_eq!(message.text(), "done");
    assert_eq!(message.stop_reason, StopReason::Length);
    let usage = &message.usage;
    assert_eq!(
        (
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write
        ),
        (10, 9, 200, 30)
    );
    assert_eq!(usage.total_tokens, 249);
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_with_an_error_event() {
    let parts = vec![
        start(json!({"input_tokens": 1, "output_tokens": 1})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "half"}}),
        ),
        event(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "half");
    assert!(message.error_message.unwrap().contains("Overloaded"));
}

#[tokio::test]
async fn an_overload_as_the_first_event_is_a_retryable_error() {
    let parts = vec![event(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let error = provider(&server)
        .stream(ask("hi"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::Server);
    assert!(error.retryable());
}

#[tokio::test]
async fn a_stream_without_message_stop_is_truncated() {
    let parts = vec![
        start(json!({"input_tokens": 1, "output_tokens": 1})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a\"}"}}),
        ),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.unwrap().contains("message_stop"));
}

#[tokio::test]
async fn a_refusal_is_an_error() {
    let parts = std::iter::once(start(json!({"input_tokens": 1, "output_tokens": 1})))
        .chain(end("refusal"))
        .collect();
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// However `input_json_delta` pieces and TCP writes are cut, the tool call is the same.
    #[test]
    fn any_split_assembles_the_same_tool_call(
        path in "[a-z/._ ]{0,40}",
        count in 0u32..1000,
        split in 1usize..12,
        cuts in proptest::collection::vec(0usize..5000, 0..12),
    ) {
        let args = json!({"path": path, "count": count, "nested": {"ok": true}});
        let turn = Turn::new(vec![Step::Thinking("t".into()), Step::tool_call("read", args.clone())]);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let arguments = runtime.block_on(async {
            let server = TestServer::start(vec![wire::anthropic(&turn, split).resplit(&cuts)]).await;
            let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default()).await.unwrap();
            json!(message.tool_calls().next().cloned().unwrap().arguments)
        });
        prop_assert_eq!(arguments, args);
    }
}
