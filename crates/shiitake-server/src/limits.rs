//! Per-process bounds of the server: how long a request may take, how many event
//! streams may be open, and the request id and tracing span of every request.
//!
//! A request that has not produced its response head within
//! [`ServerConfig::request_timeout`](crate::ServerConfig) is answered `503
//! unavailable` (an SSE stream counts as answered once its head leaves, so a long
//! stream is not cut). Open `events` and `watch` streams, A2A streams and waits and MCP
//! calls share one semaphore of
//! [`ServerConfig::max_subscribers`](crate::ServerConfig) places; one past it is
//! `503 unavailable`, and a closed stream gives its place back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shiitake_protocol::ShiitakeError;
use tower_http::request_id::{MakeRequestId, RequestId};

use crate::error::HttpError;

/// Middleware: answers `unavailable` when the inner service takes longer than the bound.
pub(crate) async fn time_bound(
    State(bound): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(bound, next.run(request)).await {
        Ok(response) => response,
        Err(_) => HttpError(ShiitakeError::unavailable(format!(
            "the request took longer than {} ms, the server's bound; retry it",
            bound.as_millis()
        )))
        .into_response(),
    }
}

/// The places for open event streams, shared with the MCP and A2A endpoints.
pub(crate) use shiitake_interop::streams::StreamPlaces as Subscribers;

/// Request ids for requests that come without one: `req-<process start>-<counter>`, unique per process.
#[derive(Clone, Debug)]
pub(crate) struct NextRequestId {
    prefix: Arc<str>,
    counter: Arc<AtomicU64>,
}

impl NextRequestId {
    pub(crate) fn new() -> Self {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        Self {
            prefix: format!("req-{started:x}").into(),
            counter: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl MakeRequestId for NextRequestId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        HeaderValue::from_str(&format!("{}-{n}", self.prefix))
            .ok()
            .map(RequestId::new)
    }
}

/// The span of one request: method, path and request id, so its log lines can be
/// followed; in a trace (`serve --otlp-endpoint`) a server span that continues the
/// caller's trace when the request carries a W3C `traceparent`.
pub(crate) fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!(
        "http",
        otel.name = %format_args!("{} {}", request.method(), request.uri().path()),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %id,
    );
    // A no-op unless a propagator was installed (the trace export's).
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(request.headers()))
    });
    if opentelemetry::trace::TraceContextExt::has_active_span(&parent) {
        // The span was made just now: it has not started, so the parent is taken.
        let _ = tracing_opentelemetry::OpenTelemetrySpanExt::set_parent(&span, parent);
    }
    span
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn places_are_bounded_and_given_back() {
        let subscribers = Subscribers::new(1);
        let held = subscribers.enter().unwrap();
        let refused = subscribers.enter().unwrap_err();
        assert_eq!(refused.code, shiitake_protocol::ErrorCode::Unavailable);
        drop(held);
        assert!(subscribers.enter().is_ok());
    }

    #[test]
    fn generated_request_ids_differ() {
        let mut ids = NextRequestId::new();
        let request = axum::http::Request::new(());
        let one = ids.make_request_id(&request).unwrap();
        let two = ids.make_request_id(&request).unwrap();
        assert_ne!(one.header_value(), two.header_value());
    }
}
