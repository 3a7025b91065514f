//! One behavioural suite, three models: the scripted model and both providers
//! (against the recording test server speaking their wire formats) must agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use shiitake_model::scripted::ScriptFailure;
use shiitake_model::{
    Anthropic, AnthropicConfig, AssistantEvent, Model, ModelErrorKind, ModelOptions,
    OpenAiCompatible, OpenAiConfig, Script, ScriptedModel, Step, Turn,
};
use shiitake_protocol::message::{AssistantContent, StopReason};
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call, check_grammar, collect};
use crate::support::server::TestServer;
use crate::support::wire::{self, Wire};

#[derive(Clone, Copy, Debug)]
enum Kind {
    OpenAi,
    Anthropic,
    Scripted,
}

const KINDS: [Kind; 3] = [Kind::OpenAi, Kind::Anthropic, Kind::Scripted];

struct Harness {
    model: Arc<dyn Model>,
    server: Option<TestServer>,
}

async fn harness(kind: Kind, turns: Vec<Turn>) -> Harness {
    match kind {
        Kind::Scripted => Harness {
            model: Arc::new(ScriptedModel::new(Script::new(turns))),
            server: None,
        },
        Kind::OpenAi | Kind::Anthropic => {
            let wire = if matches!(kind, Kind::OpenAi) {
                Wire::OpenAi
            } else {
                Wire::Anthropic
            };
            let replies = turns
                .iter()
                .map(|turn| wire::reply(wire, turn, 3))
                .collect();
            let server = TestServer::start(replies).await;
            let model: Arc<dyn Model> = match kind {
                Kind::OpenAi => Arc::new(
                    OpenAiCompatible::new(OpenAiConfig::new(format!("{}/v1", server.base), "m"))
                        .unwrap(),
                ),
                _ => Arc::new(
                    Anthropic::new(AnthropicConfig::new("m", "key").base_url(&server.base))
                        .unwrap(),
                ),
            };
            Harness {
                model,
                server: Some(server),
            }
        }
    }
}

fn fail(status: u16, retry_after_ms: Option<u64>) -> Turn {
    Turn::new(vec![Step::Fail(ScriptFailure {
        status,
        message: None,
        retry_after_ms,
    })])
}

#[tokio::test]
async fn text_and_thinking_complete_with_usage() {
    for kind in KINDS {
        let turn = Turn::new(vec![
            Step::Thinking("Let me think about it.".into()),
            Step::Text("Hello, world! This is long enough to be split.".into()),
        ]);
        let h = harness(kind, vec![turn]).await;
        let (events, message) = call(&*h.model, ask("hi"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.stop_reason, StopReason::Stop, "{kind:?}");
        assert_eq!(
            message.text(),
            "Hello, world! This is long enough to be split.",
            "{kind:?}"
        );
        assert!(
            matches!(&message.content[0], AssistantContent::Thinking(t) if t.thinking == "Let me think about it."),
            "{kind:?}: {message:?}"
        );
        let deltas = events
            .iter()
            .filter(|e| matches!(e, AssistantEvent::TextDelta { .. }))
            .count();
        assert!(deltas > 1, "{kind:?}: text arrives in several deltas");
        assert!(
            message.usage.output > 0 && message.usage.input > 0,
            "{kind:?}: usage"
        );
        assert_eq!(
            message.usage.total_tokens,
            message.usage.input
                + message.usage.output
                + message.usage.cache_read
                + message.usage.cache_write,
            "{kind:?}"
        );
        assert_eq!(message.provider, h.model.describe().provider, "{kind:?}");
        assert_eq!(message.model, h.model.describe().model, "{kind:?}");
    }
}

#[tokio::test]
async fn tool_calls_assemble_from_pieces() {
    for kind in KINDS {
        let args = json!({"path": "src/main.rs", "limit": 20, "nested": {"list": [1, 2, "three"]}});
        let turn = Turn::new(vec![
            Step::Text("Reading.".into()),
            Step::tool_call("read", args.clone()),
            Step::tool_call("list", json!({})),
        ]);
        let h = harness(kind, vec![turn]).await;
        let (_, message) = call(&*h.model, ask("read it"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.stop_reason, StopReason::ToolUse, "{kind:?}");
        let calls: Vec<_> = message.tool_calls().collect();
        assert_eq!(calls.len(), 2, "{kind:?}");
        assert_eq!(calls[0].name, "read");
        assert_eq!(json!(calls[0].arguments), args, "{kind:?}");
        assert_eq!(calls[1].name, "list");
        assert!(calls[1].arguments.is_empty());
        assert_ne!(calls[0].id, calls[1].id, "{kind:?}: distinct ids");
    }
}

#[tokio::test]
async fn length_stop_reason_is_reported() {
    for kind in KINDS {
        let mut turn = Turn::text("cut short");
        turn.stop_reason = Some(StopReason::Length);
        let h = harness(kind, vec![turn]).await;
        let (_, message) = call(&*h.model, ask("hi"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.stop_reason, StopReason::Length, "{kind:?}");
    }
}

#[tokio::test]
async fn retryable_failure_then_success() {
    for kind in KINDS {
        let h = harness(kind, vec![fail(503, Some(2000)), Turn::text("recovered")]).await;
        let error = h
            .model
            .stream(ask("hi"), ModelOptions::default(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Server, "{kind:?}");
        assert!(error.retryable(), "{kind:?}");
        assert_eq!(error.status(), Some(503));
        assert_eq!(
            error.retry_after(),
            Some(Duration::from_secs(2)),
            "{kind:?}"
        );
        let (_, message) = call(&*h.model, ask("hi"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.text(), "recovered", "{kind:?}");
    }
}

#[tokio::test]
async fn rate_limit_is_retryable_and_bad_request_is_not() {
    for kind in KINDS {
        let h = harness(
            kind,
            vec![fail(429, Some(3000)), fail(400, None), fail(401, None)],
        )
        .await;
        let cancel = CancellationToken::new;
        let limited = h
            .model
            .stream(ask("a"), ModelOptions::default(), cancel())
            .await
            .err()
            .unwrap();
        assert_eq!(
            (limited.kind(), limited.retryable()),
            (ModelErrorKind::RateLimited, true),
            "{kind:?}"
        );
        assert_eq!(
            limited.retry_after(),
            Some(Duration::from_secs(3)),
            "{kind:?}"
        );
        let bad = h
            .model
            .stream(ask("a"), ModelOptions::default(), cancel())
            .await
            .err()
            .unwrap();
        assert_eq!(
            (bad.kind(), bad.retryable()),
            (ModelErrorKind::BadRequest, false),
            "{kind:?}"
        );
        let key = h
            .model
            .stream(ask("a"), ModelOptions::default(), cancel())
            .await
            .err()
            .unwrap();
        assert_eq!(
            (key.kind(), key.retryable()),
            (ModelErrorKind::Unauthorized, false),
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn a_cut_stream_ends_with_an_error_keeping_partial_content() {
    for kind in KINDS {
        let turn = Turn::new(vec![
            Step::Text("partial answer".into()),
            Step::Cut("connection reset".into()),
        ]);
        let h = harness(kind, vec![turn]).await;
        let (_, message) = call(&*h.model, ask("hi"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.stop_reason, StopReason::Error, "{kind:?}");
        assert_eq!(message.text(), "partial answer", "{kind:?}");
        assert!(message.error_message.is_some(), "{kind:?}");
    }
}

#[tokio::test]
async fn abort_while_streaming_ends_promptly_with_aborted() {
    for kind in KINDS {
        let turn = Turn::new(vec![
            Step::Text("first words".into()),
            Step::DelayMs(60_000),
            Step::Text("never sent".into()),
        ]);
        let h = harness(kind, vec![turn]).await;
        let cancel = CancellationToken::new();
        let mut stream = h
            .model
            .stream(ask("hi"), ModelOptions::default(), cancel.clone())
            .await
            .unwrap();
        let mut events = Vec::new();
        // Read until the first text arrives, then abort.
        while let Some(event) = stream.next().await {
            let text_seen = matches!(event, AssistantEvent::TextDelta { .. });
            events.push(event);
            if text_seen {
                break;
            }
        }
        let aborted_at = Instant::now();
        cancel.cancel();
        events.extend(collect(stream).await);
        assert!(
            aborted_at.elapsed() < Duration::from_secs(5),
            "{kind:?}: abort took too long"
        );
        let message = check_grammar(&events);
        assert_eq!(message.stop_reason, StopReason::Aborted, "{kind:?}");
        assert!(
            message.text().starts_with("fir"),
            "{kind:?}: partial text kept: {message:?}"
        );
        assert!(!message.text().contains("never"), "{kind:?}");
        if let Some(server) = &h.server {
            assert!(
                server.wait_closed(1, Duration::from_secs(5)).await,
                "{kind:?}: the server saw the connection close"
            );
        }
    }
}

#[tokio::test]
async fn abort_before_the_first_byte_is_an_aborted_error() {
    for kind in KINDS {
        let turn = Turn::new(vec![Step::DelayMs(60_000), Step::Text("late".into())]);
        let h = harness(kind, vec![turn]).await;
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            canceller.cancel();
        });
        let started = Instant::now();
        let error = h
            .model
            .stream(ask("hi"), ModelOptions::default(), cancel)
            .await
            .err()
            .unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Aborted, "{kind:?}");
        assert!(!error.retryable());
        assert!(started.elapsed() < Duration::from_secs(5), "{kind:?}");
    }
}
