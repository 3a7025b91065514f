//! What an operator can measure of the server, and `GET /metrics`, where a host's
//! exporter is scraped.
//!
//! The server records its own metrics (event streams) through the `metrics` crate's
//! facade and depends on no exporter: a host that installs one (the `shiitake`
//! binary installs the Prometheus recorder with `serve --metrics`) hands the server a
//! [`MetricsText`] that renders it. The route is the operator's, like
//! `/v1/hub/nodes`: the bearer token only, never a browser's cookie; without
//! [`ServerConfig::with_metrics`](crate::ServerConfig::with_metrics) there is no such
//! route (`404`, after the token check like every unknown path).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use shiitake_protocol::{SessionFrame, ShiitakeError};

use crate::error::HttpError;
use crate::web_auth::Via;

/// Event streams open now.
pub const SSE_SUBSCRIBERS: &str = "shiitake_sse_subscribers";
/// Events sent on event streams, by `kind`.
pub const SSE_FRAMES_SENT: &str = "shiitake_sse_frames_sent_total";

/// Every metric the server records: name, kind, labels and meaning (`docs/operations.md`).
pub const METRICS: &[(&str, &str, &[&str], &str)] = &[
    (
        SSE_SUBSCRIBERS,
        "gauge",
        &[],
        "Event streams (`events` and `watch`) open now on this server.",
    ),
    (
        SSE_FRAMES_SENT,
        "counter",
        &["kind"],
        "Events sent on event streams, by kind (snapshot, update, progress, reset); a reset is a subscriber that fell behind or asked after a cursor the Session no longer has.",
    ),
];

/// Registers the help text of [`METRICS`] with the installed recorder.
pub fn describe() {
    metrics::describe_gauge!(SSE_SUBSCRIBERS, METRICS[0].3);
    metrics::describe_counter!(SSE_FRAMES_SENT, METRICS[1].3);
}

/// A host's metrics in the Prometheus text format, rendered on each scrape.
pub trait MetricsText: Send + Sync + std::fmt::Debug + 'static {
    /// Every metric now, in the text exposition format (version 0.0.4).
    fn render(&self) -> String;
}

/// `GET /metrics`: the host's metrics, for the bearer token only.
pub(crate) async fn scrape(
    State(exporter): State<Arc<dyn MetricsText>>,
    via: Option<axum::Extension<Via>>,
) -> Response {
    if !matches!(via, Some(axum::Extension(Via::Bearer))) {
        let refused =
            ShiitakeError::not_granted("only the operator's bearer token reads the metrics");
        return HttpError(refused).into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        exporter.render(),
    )
        .into_response()
}

/// One open event stream, counted in [`SSE_SUBSCRIBERS`] until it is dropped.
#[derive(Debug)]
pub(crate) struct Subscribed(());

impl Subscribed {
    pub(crate) fn new() -> Self {
        metrics::gauge!(SSE_SUBSCRIBERS).increment(1.0);
        Self(())
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        metrics::gauge!(SSE_SUBSCRIBERS).decrement(1.0);
    }
}

/// The `kind` label of a frame's event.
pub(crate) fn frame_kind(frame: &SessionFrame) -> &'static str {
    match frame {
        SessionFrame::Update(_) => "update",
        SessionFrame::Progress(_) => "progress",
        SessionFrame::Reset(_) => "reset",
    }
}

/// One event of `kind` left on a stream.
pub(crate) fn sent(kind: &'static str) {
    metrics::counter!(SSE_FRAMES_SENT, "kind" => kind).increment(1);
}
