//! Aborting a provider call: while waiting for headers, and mid-stream with the
//! server seeing its connection close.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use shiitake_model::{
    Anthropic, AnthropicConfig, AssistantEvent, Model, ModelErrorKind, ModelOptions,
    OpenAiCompatible, OpenAiConfig, Step, Turn,
};
use shiitake_protocol::message::StopReason;
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, check_grammar, collect};
use crate::support::server::{Part, Reply, TestServer};
use crate::support::wire::{self, Wire};

fn model(wire: Wire, base: &str) -> Box<dyn Model> {
    match wire {
        Wire::OpenAi => {
            Box::new(OpenAiCompatible::new(OpenAiConfig::new(format!("{base}/v1"), "m")).unwrap())
        }
        Wire::Anthropic => {
            Box::new(Anthropic::new(AnthropicConfig::new("m", "k").base_url(base)).unwrap())
        }
    }
}

#[tokio::test]
async fn abort_while_waiting_for_headers_returns_aborted_promptly() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = TestServer::start(vec![Reply {
            parts: vec![Part::DelayHeaders(30_000)],
            ..Reply::sse(vec![])
        }])
        .await;
        let model = model(wire, &server.base);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let error = model
            .stream(ask("hi"), ModelOptions::default(), cancel)
            .await
            .err()
            .unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Aborted, "{wire:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{wire:?}");
    }
}

#[tokio::test]
async fn abort_mid_tool_call_keeps_the_partial_message_and_closes_the_connection() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let turn = Turn::new(vec![
            Step::Text("calling".into()),
            Step::tool_call("read", serde_json::json!({"path": "x"})),
            Step::DelayMs(60_000),
        ]);
        // The tool call's arguments arrive, then the server stalls before finishing.
        let server = TestServer::start(vec![wire::reply(wire, &turn, 2)]).await;
        let model = model(wire, &server.base);
        let cancel = CancellationToken::new();
        let mut stream = model
            .stream(ask("hi"), ModelOptions::default(), cancel.clone())
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            let started_call = matches!(event, AssistantEvent::ToolcallDelta { .. });
            events.push(event);
            if started_call {
                break;
            }
        }
        cancel.cancel();
        events.extend(collect(stream).await);
        let message = check_grammar(&events);
        assert_eq!(message.stop_reason, StopReason::Aborted, "{wire:?}");
        assert_eq!(message.text(), "calling", "{wire:?}");
        assert_eq!(
            message.error_message.as_deref(),
            Some("aborted while the model was streaming")
        );
        assert!(
            server.wait_closed(1, Duration::from_secs(5)).await,
            "{wire:?}: connection closed"
        );
    }
}

#[tokio::test]
async fn dropping_the_stream_also_closes_the_connection() {
    let turn = Turn::new(vec![Step::Text("hello".into()), Step::DelayMs(60_000)]);
    let server = TestServer::start(vec![wire::reply(Wire::OpenAi, &turn, 2)]).await;
    let model = model(Wire::OpenAi, &server.base);
    let mut stream = model
        .stream(ask("hi"), ModelOptions::default(), CancellationToken::new())
        .await
        .unwrap();
    assert!(stream.next().await.is_some());
    drop(stream);
    assert!(server.wait_closed(1, Duration::from_secs(5)).await);
}
