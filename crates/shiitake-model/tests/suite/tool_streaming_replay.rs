//! `ToolStreaming::NonStreamingReplay`: for servers that cannot stream tool
//! calls, tool-bearing requests go out with `stream: false` and the whole
//! answer comes back as the same events the streaming path gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_model::scripted::Turn;
use shiitake_model::{
    AssistantEvent, HttpLimits, Model, ModelContext, ModelEnv, ModelErrorKind, ModelOptions,
    OpenAiCompatible, OpenAiConfig, Step, ToolChoice, ToolSpec, ToolStreaming, select,
};
use shiitake_protocol::message::StopReason;
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call};
use crate::support::server::{Part, Reply, TestServer};
use crate::support::wire;

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "files__read".into(),
        description: "Read a file.".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"]}),
    }
}

fn with_tools(text: &str) -> ModelContext {
    let mut context = ask(text);
    context.tools = vec![read_tool()];
    context
}

fn provider(server: &TestServer, tool_streaming: ToolStreaming) -> OpenAiCompatible {
    OpenAiCompatible::new(
        OpenAiConfig::new(format!("{}/v1", server.base), "local").tool_streaming(tool_streaming),
    )
    .unwrap()
}

fn call_turn() -> Turn {
    let mut arguments = serde_json::Map::new();
    arguments.insert("path".into(), json!("notes.txt"));
    Turn::new(vec![
        Step::Thinking("The person wants the notes.".into()),
        Step::Text("Reading notes.txt.".into()),
        Step::ToolCall(shiitake_model::scripted::ScriptToolCall {
            id: Some("call_7".into()),
            name: "files__read".into(),
            arguments,
        }),
    ])
}

/// Events with the two timestamps that differ between calls set to zero.
fn normalised(events: Vec<AssistantEvent>) -> Vec<AssistantEvent> {
    events
        .into_iter()
        .map(|mut event| {
            match &mut event {
                AssistantEvent::Done { message, .. } => message.timestamp = 0,
                AssistantEvent::Error { error, .. } => error.timestamp = 0,
                _ => {}
            }
            event
        })
        .collect()
}

#[tokio::test]
async fn a_tool_call_answer_replays_as_exactly_the_streamed_events() {
    let turn = call_turn();
    // The streaming path, every piece in one chunk, against the replay path.
    let streaming_server = TestServer::start(vec![wire::openai(&turn, 10_000)]).await;
    let (streamed, streamed_message) = call(
        &provider(&streaming_server, ToolStreaming::Streaming),
        with_tools("What do the notes say?"),
        ModelOptions::default(),
    )
    .await
    .unwrap();
    let whole_server = TestServer::start(vec![wire::openai_whole(&turn)]).await;
    let (replayed, replayed_message) = call(
        &provider(&whole_server, ToolStreaming::NonStreamingReplay),
        with_tools("What do the notes say?"),
        ModelOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(normalised(replayed), normalised(streamed));
    assert_eq!(replayed_message.stop_reason, StopReason::ToolUse);
    assert_eq!(replayed_message.usage.total_tokens, 17);
    assert_eq!(
        replayed_message.content, streamed_message.content,
        "thinking, text, tool call"
    );

    let sent = &whole_server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["stream"], json!(false));
    assert_eq!(sent.body.get("stream_options"), None);
    assert_eq!(sent.body["tool_choice"], json!("auto"));
    assert_eq!(sent.body["tools"][0]["function"]["name"], "files__read");
    assert_eq!(sent.headers["accept"], "application/json");
    assert_eq!(streaming_server.requests()[0].body["stream"], json!(true));
}

#[tokio::test]
async fn a_text_answer_and_a_length_stop_replay_too() {
    let mut long = Turn::text("Cut short");
    long.stop_reason = Some(StopReason::Length);
    let server = TestServer::start(vec![
        wire::openai_whole(&Turn::text("Hello there.")),
        wire::openai_whole(&long),
    ])
    .await;
    let model = provider(&server, ToolStreaming::NonStreamingReplay);
    let (events, message) = call(&model, with_tools("hi"), ModelOptions::default())
        .await
        .unwrap();
    let names: Vec<_> = events.iter().map(AssistantEvent::name).collect();
    assert_eq!(
        names,
        ["start", "text_start", "text_delta", "text_end", "done"]
    );
    assert_eq!(message.text(), "Hello there.");
    assert_eq!(message.stop_reason, StopReason::Stop);
    let (_, message) = call(&model, with_tools("more"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::Length);
}

#[tokio::test]
async fn an_empty_answer_is_a_completed_message_with_no_content() {
    let server = TestServer::start(vec![wire::openai_whole(&Turn::new(vec![]))]).await;
    let (events, message) = call(
        &provider(&server, ToolStreaming::NonStreamingReplay),
        with_tools("hi"),
        ModelOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(message.content.is_empty());
    assert_eq!(message.stop_reason, StopReason::Stop);
}

#[tokio::test]
async fn requests_without_tools_or_with_tool_choice_none_still_stream() {
    let server = TestServer::start(vec![
        wire::openai(&Turn::text("no tools"), 3),
        wire::openai(&Turn::text("tools refused"), 3),
    ])
    .await;
    let model = provider(&server, ToolStreaming::NonStreamingReplay);
    let (_, first) = call(&model, ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    let none = ModelOptions {
        tool_choice: ToolChoice::None,
        ..ModelOptions::default()
    };
    let (_, second) = call(&model, with_tools("hi"), none).await.unwrap();
    assert_eq!(
        (first.text(), second.text()),
        ("no tools".into(), "tools refused".into())
    );
    let streamed: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.body["stream"].clone())
        .collect();
    assert_eq!(streamed, [json!(true), json!(true)]);
}

#[tokio::test]
async fn a_named_tool_choice_is_asked_whole_too() {
    let server = TestServer::start(vec![wire::openai_whole(&call_turn())]).await;
    let options = ModelOptions {
        tool_choice: ToolChoice::Tool("files__read".into()),
        ..ModelOptions::default()
    };
    let (_, message) = call(
        &provider(&server, ToolStreaming::NonStreamingReplay),
        with_tools("read it"),
        options,
    )
    .await
    .unwrap();
    assert_eq!(message.tool_calls().count(), 1);
    let sent = &server.requests()[0].body;
    assert_eq!(sent["stream"], json!(false));
    assert_eq!(sent["tool_choice"]["function"]["name"], "files__read");
}

#[tokio::test]
async fn failures_are_classified_before_any_event() {
    let server = TestServer::start(vec![
        Reply::error(429, json!({"error": {"message": "slow down"}})).header("retry-after", "2"),
        Reply::error(200, json!({"choices": []})),
        Reply::sse(vec![]),
        Reply::error(200, json!({"error": {"message": "model crashed"}})),
    ])
    .await;
    let model = provider(&server, ToolStreaming::NonStreamingReplay);
    let mut kinds = Vec::new();
    for _ in 0..4 {
        let error = model
            .stream(
                with_tools("hi"),
                ModelOptions::default(),
                CancellationToken::new(),
            )
            .await
            .err()
            .unwrap();
        kinds.push((error.kind(), error.retryable()));
        if error.kind() == ModelErrorKind::RateLimited {
            assert_eq!(error.retry_after(), Some(Duration::from_secs(2)));
        }
    }
    assert_eq!(
        kinds,
        [
            (ModelErrorKind::RateLimited, true),
            (ModelErrorKind::InvalidResponse, false),
            (ModelErrorKind::InvalidResponse, false),
            (ModelErrorKind::Server, true),
        ]
    );
}

/// Replays `turn` under a bound of `max_bytes` for the whole answer.
async fn replay_under_bound(max_bytes: usize) -> Result<String, ModelErrorKind> {
    let reply = wire::openai_whole(&Turn::text("x".repeat(1000)));
    let server = TestServer::start(vec![reply]).await;
    let limits = HttpLimits {
        max_event_bytes: max_bytes,
        ..HttpLimits::default()
    };
    let model = OpenAiCompatible::new(
        OpenAiConfig::new(format!("{}/v1", server.base), "m")
            .limits(limits)
            .tool_streaming(ToolStreaming::NonStreamingReplay),
    )
    .unwrap();
    match call(&model, with_tools("hi"), ModelOptions::default()).await {
        Ok((_, message)) => Ok(message.text()),
        Err(error) => Err(error.kind()),
    }
}

fn whole_answer_bytes() -> usize {
    let reply = wire::openai_whole(&Turn::text("x".repeat(1000)));
    reply
        .parts
        .iter()
        .map(|part| match part {
            Part::Data(data) => data.len(),
            _ => 0,
        })
        .sum()
}

#[tokio::test]
async fn a_whole_answer_at_the_bound_is_read_and_one_byte_past_it_is_refused() {
    let size = whole_answer_bytes();
    assert_eq!(replay_under_bound(size).await, Ok("x".repeat(1000)));
    assert_eq!(
        replay_under_bound(size - 1).await,
        Err(ModelErrorKind::InvalidResponse)
    );
}

#[tokio::test]
async fn cancelling_while_the_server_computes_aborts_and_closes_the_connection() {
    // Headers at once, then nothing for a minute: the body is what takes long.
    let server = TestServer::start(vec![Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        parts: vec![Part::Wait(60_000), Part::Data("{}".into())],
    }])
    .await;
    let model = provider(&server, ToolStreaming::NonStreamingReplay);
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let error = model
        .stream(with_tools("hi"), ModelOptions::default(), cancel)
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::Aborted);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        server.wait_closed(1, Duration::from_secs(5)).await,
        "the server saw the connection close"
    );
}

#[tokio::test]
async fn the_spec_option_chooses_replay_and_bad_options_are_refused() {
    let server = TestServer::start(vec![wire::openai_whole(&call_turn())]).await;
    let spec = format!(
        "openai-compatible:{}/v1#local?tool_streaming=replay",
        server.base
    );
    let model = select(&spec, &ModelEnv::default()).unwrap();
    assert_eq!(model.describe().model, "local");
    let (_, message) = call(&*model, with_tools("read it"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(server.requests()[0].body["stream"], json!(false));

    let streaming = format!(
        "openai-compatible:{}/v1#local?tool_streaming=streaming",
        server.base
    );
    assert!(select(&streaming, &ModelEnv::default()).is_ok());
    for (bad, says) in [
        ("tool_streaming=sometimes", "`streaming` or `replay`"),
        ("tool_streaming", "needs a value"),
        ("temperature=0", "unknown option `temperature`"),
    ] {
        let spec = format!("openai-compatible:http://127.0.0.1:1/v1#local?{bad}");
        let error = select(&spec, &ModelEnv::default()).err().unwrap();
        assert!(error.to_string().contains(says), "{bad}: {error}");
    }
}
