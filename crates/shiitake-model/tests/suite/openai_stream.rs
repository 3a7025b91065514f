//! The OpenAI-compatible provider against the recording test server: what it
//! sends, and how it reads every shape of chunk stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use shiitake_model::scripted::Turn;
use shiitake_model::{
    HttpLimits, Model, ModelContext, ModelErrorKind, ModelOptions, OpenAiCompatible, OpenAiConfig,
    ReasoningLevel, Step, ToolChoice, ToolSpec,
};
use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, InputContent, Message, StopReason, TextContent, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call};
use crate::support::server::{Part, Reply, TestServer};
use crate::support::wire;

fn provider(server: &TestServer) -> OpenAiCompatible {
    OpenAiCompatible::new(
        OpenAiConfig::new(format!("{}/v1", server.base), "gpt-test")
            .api_key("sk-test")
            .header("HTTP-Referer", "https://shiitake.example"),
    )
    .unwrap()
}

fn chunk(delta: Value) -> Part {
    Part::Data(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": delta}]})
    ))
}

fn finish(reason: &str) -> Part {
    Part::Data(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    ))
}

fn done() -> Part {
    Part::Data("data: [DONE]\n\n".into())
}

fn assistant_with_call(stop: StopReason, model: &str) -> AssistantMessage {
    let mut arguments = serde_json::Map::new();
    arguments.insert("path".into(), json!("a.txt"));
    AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "read".into(),
            arguments,
            thought_signature: None,
            extra: Default::default(),
        })],
        api: "openai-completions".into(),
        provider: "openai-compatible".into(),
        model: model.into(),
        usage: Usage::default(),
        stop_reason: stop,
        error_message: None,
        timestamp: 2,
        extra: Default::default(),
    }
}

#[tokio::test]
async fn the_request_carries_tools_options_headers_and_the_replayed_transcript() {
    let server = TestServer::start(vec![wire::openai(&Turn::text("ok"), 4)]).await;
    let model = provider(&server);
    let mut failed = assistant_with_call(StopReason::Error, "gpt-test");
    failed.error_message = Some("boom".into());
    let context = ModelContext {
        system_prompt: "Be terse.".into(),
        messages: vec![
            Message::User(UserMessage::text("read a.txt", 1)),
            Message::Assistant(failed),
            Message::Assistant(assistant_with_call(StopReason::ToolUse, "gpt-test")),
            Message::User(UserMessage::text("never mind", 3)),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
    };
    let options = ModelOptions {
        max_tokens: Some(100),
        temperature: Some(0.5),
        reasoning: Some(ReasoningLevel::High),
        tool_choice: ToolChoice::Tool("read".into()),
    };
    call(&model, context, options).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
    assert_eq!(request.headers["http-referer"], "https://shiitake.example");
    let expected = json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": shiitake_model::replay::MISSING_RESULT_TEXT},
            {"role": "user", "content": "never mind"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": 100,
        "temperature": 0.5,
        "reasoning_effort": "high",
        "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
        "tool_choice": {"type": "function", "function": {"name": "read"}}
    });
    assert_eq!(request.body, expected);
}

#[tokio::test]
async fn tool_results_and_images_are_encoded() {
    let server = TestServer::start(vec![wire::openai(&Turn::text("ok"), 4)]).await;
    let model = provider(&server);
    let context = ModelContext {
        system_prompt: String::new(),
        messages: vec![
            Message::User(UserMessage::text("read", 1)),
            Message::Assistant(assistant_with_call(StopReason::ToolUse, "other-model")),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_1".into(),
                tool_name: "read".into(),
                content: vec![InputContent::Text(TextContent::new("contents"))],
                details: Some(json!({"never": "sent"})),
                is_error: false,
                timestamp: 3,
                extra: Default::default(),
            }),
        ]
        .into(),
        tools: vec![],
    };
    call(&model, context, ModelOptions::default())
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "contents"})
    );
    assert!(
        body.get("tools").is_none()
            && body.get("tool_choice").is_none()
            && body.get("max_tokens").is_none()
    );
}

#[tokio::test]
async fn reasoning_fields_become_thinking_and_usage_counts_cached_tokens() {
    let usage = json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 7,
        "total_tokens": 107, "prompt_tokens_details": {"cached_tokens": 60}}});
    let parts = vec![
        chunk(json!({"role": "assistant"})),
        chunk(json!({"reasoning": "Ollama-style "})),
        chunk(json!({"reasoning_content": "and vLLM-style"})),
        chunk(json!({"content": "answer"})),
        finish("stop"),
        Part::Data(format!("data: {usage}\n\n")),
        done(),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(&message.content[0], AssistantContent::Thinking(t) if t.thinking == "Ollama-style and vLLM-style")
    );
    assert_eq!(message.text(), "answer");
    assert_eq!(
        (
            message.usage.input,
            message.usage.cache_read,
            message.usage.output
        ),
        (40, 60, 7)
    );
    assert_eq!(message.usage.total_tokens, 107);
}

#[tokio::test]
async fn an_error_chunk_mid_stream_ends_with_an_error_event() {
    let parts = vec![
        chunk(json!({"content": "half"})),
        Part::Data(format!(
            "data: {}\n\n",
            json!({"error": {"message": "model crashed", "code": 500}})
        )),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "half");
    assert!(message.error_message.unwrap().contains("model crashed"));
}

#[tokio::test]
async fn an_empty_200_body_is_an_invalid_response_error() {
    let server = TestServer::start(vec![Reply::sse(vec![])]).await;
    let error = provider(&server)
        .stream(ask("hi"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::InvalidResponse);
    assert!(!error.retryable());
}

#[tokio::test]
async fn done_without_finish_reason_is_a_truncation_error() {
    let parts = vec![chunk(json!({"content": "cut"})), done()];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "cut");
}

#[tokio::test]
async fn a_finish_reason_without_done_still_completes() {
    let parts = vec![chunk(json!({"content": "fine"})), finish("stop")];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (message.stop_reason, message.text()),
        (StopReason::Stop, "fine".to_owned())
    );
}

#[tokio::test]
async fn llama_cpp_style_chunks_repeating_id_and_name_assemble_one_call() {
    let piece = |args: &str| {
        chunk(
            json!({"content": null, "function_call": {"name": "get_weather", "arguments": args},
            "tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                "function": {"name": "get_weather", "arguments": args}}]}),
        )
    };
    let parts = vec![
        piece("{"),
        piece(" \"city\""),
        piece(": \"Paris\""),
        piece(" }"),
        finish("tool_calls"),
        done(),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(json!(calls[0].arguments), json!({"city": "Paris"}));
}

#[tokio::test]
async fn invalid_tool_arguments_end_with_an_error() {
    let parts = vec![
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "read", "arguments": "{\"pa"}}]}),
        ),
        finish("tool_calls"),
        done(),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.unwrap().contains("read"));
}

#[tokio::test]
async fn an_oversized_event_is_refused() {
    let big = "x".repeat(4096);
    let parts = vec![
        chunk(json!({"content": "ok"})),
        chunk(json!({"content": big})),
        finish("stop"),
        done(),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let limits = HttpLimits {
        max_event_bytes: 1024,
        ..HttpLimits::default()
    };
    let model =
        OpenAiCompatible::new(OpenAiConfig::new(format!("{}/v1", server.base), "m").limits(limits))
            .unwrap();
    let (_, message) = call(&model, ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "ok");
    assert!(message.error_message.unwrap().contains("1024"));
}

/// Streams `ok`, then `big` in one event, then the end, under `max_event_bytes`.
async fn read_under_event_bound(big: &str, max_event_bytes: usize) -> AssistantMessage {
    let parts = vec![
        chunk(json!({"content": "ok"})),
        chunk(json!({"content": big})),
        finish("stop"),
        done(),
    ];
    let server = TestServer::start(vec![Reply::sse(parts)]).await;
    let limits = HttpLimits {
        max_event_bytes,
        ..HttpLimits::default()
    };
    let model =
        OpenAiCompatible::new(OpenAiConfig::new(format!("{}/v1", server.base), "m").limits(limits))
            .unwrap();
    let (_, message) = call(&model, ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    message
}

/// The size of `big`'s event as the bound counts it: every byte but CR and LF.
fn counted_event_bytes(big: &str) -> usize {
    let Part::Data(event) = chunk(json!({"content": big})) else {
        panic!("a chunk is a data part");
    };
    event
        .bytes()
        .filter(|b| !matches!(b, b'\r' | b'\n'))
        .count()
}

#[tokio::test]
async fn an_event_exactly_at_the_bound_is_read() {
    let big = "x".repeat(1000);
    let message = read_under_event_bound(&big, counted_event_bytes(&big)).await;
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.error_message, None);
    assert_eq!(message.text(), format!("ok{big}"));
}

#[tokio::test]
async fn an_event_one_byte_past_the_bound_is_refused() {
    let big = "x".repeat(1000);
    let limit = counted_event_bytes(&big) - 1;
    let message = read_under_event_bound(&big, limit).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "ok");
    assert!(
        message
            .error_message
            .unwrap()
            .contains(&format!("{limit} bytes"))
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// However the arguments are split into deltas and the body into TCP writes,
    /// the assembled tool call is the same.
    #[test]
    fn any_split_assembles_the_same_tool_call(
        path in "[a-z/._ ]{0,40}",
        count in 0u32..1000,
        flag: bool,
        split in 1usize..12,
        cuts in proptest::collection::vec(0usize..4000, 0..12),
    ) {
        let args = json!({"path": path, "count": count, "flag": flag, "list": [1, "two", null]});
        let turn = Turn::new(vec![Step::Text("x".into()), Step::tool_call("read", args.clone())]);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (name, arguments) = runtime.block_on(async {
            let reply = wire::openai(&turn, split).resplit(&cuts);
            let server = TestServer::start(vec![reply]).await;
            let (_, message) = call(&provider(&server), ask("hi"), ModelOptions::default()).await.unwrap();
            let call = message.tool_calls().next().cloned().unwrap();
            (call.name, json!(call.arguments))
        });
        prop_assert_eq!(name, "read");
        prop_assert_eq!(arguments, args);
    }
}
