//! Failures before the first byte, classified for the runner's back-off, for both providers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use serde_json::json;
use shiitake_model::{
    Anthropic, AnthropicConfig, HttpLimits, Model, ModelError, ModelErrorKind, ModelOptions,
    OpenAiCompatible, OpenAiConfig,
};
use tokio_util::sync::CancellationToken;

use crate::support::check::ask;
use crate::support::server::{Part, Reply, TestServer};

fn models(base: &str, limits: HttpLimits) -> Vec<Box<dyn Model>> {
    vec![
        Box::new(
            OpenAiCompatible::new(OpenAiConfig::new(format!("{base}/v1"), "m").limits(limits))
                .unwrap(),
        ),
        Box::new(
            Anthropic::new(AnthropicConfig::new("m", "k").base_url(base).limits(limits)).unwrap(),
        ),
    ]
}

async fn first_error(model: &dyn Model) -> ModelError {
    model
        .stream(ask("hi"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .expect("an error")
}

#[tokio::test]
async fn statuses_map_to_kinds_and_retryability() {
    let table = [
        (429, ModelErrorKind::RateLimited, true),
        (500, ModelErrorKind::Server, true),
        (502, ModelErrorKind::Server, true),
        (503, ModelErrorKind::Server, true),
        (529, ModelErrorKind::Server, true),
        (408, ModelErrorKind::Timeout, true),
        (400, ModelErrorKind::BadRequest, false),
        (413, ModelErrorKind::BadRequest, false),
        (422, ModelErrorKind::BadRequest, false),
        (401, ModelErrorKind::Unauthorized, false),
        (403, ModelErrorKind::Unauthorized, false),
        (404, ModelErrorKind::NotFound, false),
    ];
    for (status, kind, retryable) in table {
        let body = json!({"error": {"message": format!("status {status} says no")}});
        let server = TestServer::start(vec![
            Reply::error(status, body.clone()),
            Reply::error(status, body),
        ])
        .await;
        for model in models(&server.base, HttpLimits::default()) {
            let error = first_error(&*model).await;
            assert_eq!(
                (error.kind(), error.retryable(), error.status()),
                (kind, retryable, Some(status))
            );
            assert_eq!(
                error.message(),
                format!("status {status} says no"),
                "the body's message is kept"
            );
        }
    }
}

#[tokio::test]
async fn retry_after_is_read_as_seconds_milliseconds_or_a_date() {
    let in_ten = httpdate(SystemTime::now() + Duration::from_secs(10));
    let replies = vec![
        Reply::error(429, json!({})).header("retry-after", "7"),
        Reply::error(429, json!({}))
            .header("retry-after-ms", "1500")
            .header("retry-after", "9"),
        Reply::error(503, json!({})).header("retry-after", &in_ten),
        Reply::error(503, json!({})),
    ];
    let server = TestServer::start(replies).await;
    let model =
        OpenAiCompatible::new(OpenAiConfig::new(format!("{}/v1", server.base), "m")).unwrap();
    assert_eq!(
        first_error(&model).await.retry_after(),
        Some(Duration::from_secs(7))
    );
    assert_eq!(
        first_error(&model).await.retry_after(),
        Some(Duration::from_millis(1500))
    );
    let dated = first_error(&model).await.retry_after().unwrap();
    assert!(
        dated > Duration::from_secs(5) && dated <= Duration::from_secs(11),
        "{dated:?}"
    );
    assert_eq!(first_error(&model).await.retry_after(), None);
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    for model in models(&base, HttpLimits::default()) {
        let error = first_error(&*model).await;
        assert_eq!(
            (error.kind(), error.retryable()),
            (ModelErrorKind::Connect, true),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_silent_server_is_a_retryable_timeout() {
    let limits = HttpLimits {
        idle_timeout: Duration::from_millis(300),
        ..HttpLimits::default()
    };
    let replies = vec![
        Reply {
            parts: vec![Part::DelayHeaders(3_000)],
            ..Reply::sse(vec![])
        },
        Reply {
            parts: vec![Part::DelayHeaders(3_000)],
            ..Reply::sse(vec![])
        },
    ];
    let server = TestServer::start(replies).await;
    for model in models(&server.base, limits) {
        let error = first_error(&*model).await;
        assert_eq!(
            (error.kind(), error.retryable()),
            (ModelErrorKind::Timeout, true),
            "{error}"
        );
    }
}

/// Formats an IMF-fixdate, the form `parse_retry_after` reads first.
fn httpdate(when: SystemTime) -> String {
    httpdate::fmt_http_date(when)
}
