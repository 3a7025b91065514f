//! The OpenAI-compatible provider against a real model: llama.cpp's server
//! with SmolLM2-135M and Shiitake's `shiitake-tools` chat handler (`cargo xtask
//! local-model start`), here in streaming mode. Runs when
//! `SHIITAKE_TEST_LOCAL_MODEL_URL` names a server that answers (`cargo xtask test`
//! sets it; see `shiitake-test-services` for what happens otherwise), and asserts
//! protocol facts only, never wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_model::{
    AssistantEvent, Model, ModelContext, ModelErrorKind, ModelOptions, OpenAiCompatible,
    OpenAiConfig, ToolChoice, ToolSpec,
};
use shiitake_protocol::message::{
    AssistantContent, AssistantMessage, InputContent, Message, StopReason, TextContent, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};
use shiitake_test_services::Service;
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call, check_grammar, collect};

/// llama-cpp-python interrupts a streaming request when another arrives: one at a time.
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The provider for the local server, or `None` after the `SKIPPED` line when it is
/// not configured or does not answer (a failure when `SHIITAKE_REQUIRE_SERVICES=1`).
fn local_model() -> Option<OpenAiCompatible> {
    let url = Service::LocalModel.url()?;
    Some(OpenAiCompatible::new(OpenAiConfig::new(url, "smollm2")).unwrap())
}

fn options(max_tokens: u32, tool_choice: ToolChoice) -> ModelOptions {
    ModelOptions {
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        reasoning: None,
        tool_choice,
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"]
        }),
    }
}

fn assert_usage_consistent(usage: &Usage) {
    // The bundled handler reports usage on every answer (a server without it records
    // `unknown`, all zeros): what is known is non-zero and adds up.
    if usage.is_known() {
        assert!(
            usage.input + usage.cache_read > 0 && usage.output > 0,
            "{usage:?}"
        );
    } else {
        assert_eq!(*usage, Usage::unknown());
    }
    assert_eq!(
        usage.total_tokens,
        usage.input + usage.output + usage.cache_read + usage.cache_write
    );
}

#[tokio::test]
async fn streams_a_complete_text_answer() {
    let Some(model) = local_model() else { return };
    let _turn = SERVER.lock().await;
    let (events, message) = call(
        &model,
        ask("Say hello in one short sentence."),
        options(24, ToolChoice::Auto),
    )
    .await
    .unwrap();
    assert!(
        matches!(events.last(), Some(AssistantEvent::Done { .. })),
        "{events:?}"
    );
    assert!(matches!(
        message.stop_reason,
        StopReason::Stop | StopReason::Length
    ));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AssistantEvent::TextDelta { .. })),
        "some text streamed"
    );
    assert_eq!(
        (message.api.as_str(), message.model.as_str()),
        ("openai-completions", "smollm2")
    );
    assert_usage_consistent(&message.usage);
}

#[tokio::test]
async fn a_named_tool_choice_streams_a_schema_valid_tool_call() {
    let Some(model) = local_model() else { return };
    let _turn = SERVER.lock().await;
    let mut context = ask("What is the weather in Paris?");
    context.tools = vec![weather_tool()];
    let (_, message) = call(
        &model,
        context,
        options(64, ToolChoice::Tool("get_weather".into())),
    )
    .await
    .unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse, "{message:?}");
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{message:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert!(!calls[0].id.is_empty());
    // Schema: an object whose required `city` is a string.
    assert!(
        calls[0].arguments.get("city").is_some_and(Value::is_string),
        "{:?}",
        calls[0].arguments
    );
}

#[tokio::test]
async fn an_empty_200_stream_is_an_error_not_an_empty_success() {
    let Some(model) = local_model() else { return };
    let _turn = SERVER.lock().await;
    // llama-cpp-python's own chatml-function-calling answered an empty 200 here; whatever the
    // server's handler, an empty answer must be an error and anything else a complete message.
    let mut context = ask("What is the weather in Paris? Use the get_weather tool.");
    context.tools = vec![weather_tool()];
    match model
        .stream(
            context,
            options(64, ToolChoice::Auto),
            CancellationToken::new(),
        )
        .await
    {
        Err(error) => assert_eq!(error.kind(), ModelErrorKind::InvalidResponse, "{error}"),
        Ok(stream) => {
            // The model answered in text instead: then it must be a complete message.
            let events = collect(stream).await;
            let message = check_grammar(&events);
            assert!(!message.content.is_empty() || message.stop_reason == StopReason::Error);
        }
    }
}

#[tokio::test]
async fn a_replayed_tool_exchange_is_accepted() {
    let Some(model) = local_model() else { return };
    let _turn = SERVER.lock().await;
    let info = model.describe();
    let mut arguments = serde_json::Map::new();
    arguments.insert("city".into(), json!("Paris"));
    let assistant = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "get_weather".into(),
            arguments,
            thought_signature: None,
            extra: Default::default(),
        })],
        api: info.api,
        provider: info.provider,
        model: info.model,
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 2,
        extra: Default::default(),
    };
    let context = ModelContext {
        system_prompt: "Answer briefly.".into(),
        messages: vec![
            Message::User(UserMessage::text("What is the weather in Paris?", 1)),
            Message::Assistant(assistant),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_1".into(),
                tool_name: "get_weather".into(),
                content: vec![InputContent::Text(TextContent::new("Sunny, 21 C"))],
                details: None,
                is_error: false,
                timestamp: 3,
                extra: Default::default(),
            }),
        ]
        .into(),
        tools: vec![weather_tool()],
    };
    let (events, message) = call(&model, context, options(32, ToolChoice::None))
        .await
        .unwrap();
    assert!(
        matches!(events.last(), Some(AssistantEvent::Done { .. })),
        "{message:?}"
    );
}

#[tokio::test]
async fn abort_while_streaming_from_the_real_server() {
    let Some(model) = local_model() else { return };
    let _turn = SERVER.lock().await;
    let cancel = CancellationToken::new();
    let mut stream = model
        .stream(
            ask("Count from one to one hundred in words."),
            options(400, ToolChoice::Auto),
            cancel.clone(),
        )
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let delta = matches!(event, AssistantEvent::TextDelta { .. });
        events.push(event);
        if delta {
            break;
        }
    }
    let started = Instant::now();
    cancel.cancel();
    events.extend(collect(stream).await);
    assert!(started.elapsed() < Duration::from_secs(5));
    let message = check_grammar(&events);
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert!(!message.text().is_empty(), "partial text kept");
}
