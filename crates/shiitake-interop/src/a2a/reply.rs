//! How an answer goes out, always with HTTP 200 (clients read a typed JSON-RPC error
//! only then): a JSON response now; a JSON response once a wait is over; or an SSE
//! stream, one whole JSON-RPC response per event, closed after the last.
//!
//! An answer that waits (a blocking `SendMessage`) sends its headers at once and a
//! space every keep-alive while it waits, then the JSON: whitespace before JSON is
//! still the same JSON, the client's read timeout sees bytes, and the server's bound
//! on the time to a response's head does not cut a long run short. A client that
//! goes stops the wait, not the work.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::UnboundedReceiver;

use super::envelope;
use super::events::Item;

/// A JSON response now.
pub fn json(value: &Value) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

/// A JSON value still being worked out.
pub type Pending = Pin<Box<dyn Future<Output = Value> + Send>>;

/// The body of a JSON response that `value` will give: a space every `keep_alive`
/// until then, then the JSON.
pub fn json_body(
    value: Pending,
    keep_alive: Duration,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    let start = tokio::time::Instant::now() + keep_alive;
    let ticks = tokio::time::interval_at(start, keep_alive);
    futures::stream::unfold(Some((value, ticks)), |state| async move {
        let (mut value, mut ticks) = state?;
        tokio::select! {
            biased;
            value = &mut value => Some((Ok(Bytes::from(value.to_string())), None)),
            _ = ticks.tick() => Some((Ok(Bytes::from_static(b" ")), Some((value, ticks)))),
        }
    })
}

/// A JSON response whose value `value` will give, kept alive while it waits; `place`
/// (of the process's open responses) is held until the body ends.
pub fn json_later(value: Pending, keep_alive: Duration, place: OwnedSemaphorePermit) -> Response {
    let body = json_body(value, keep_alive).map(move |chunk| {
        let _held = &place;
        chunk
    });
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from_stream(body),
    )
        .into_response()
}

/// The SSE data of one item, as a response to the request `id`.
fn event(id: &Value, item: Item) -> Event {
    match item {
        Item::Event(event) => {
            let result = serde_json::to_value(&*event).unwrap_or(Value::Null);
            Event::default().data(envelope::result(id, result).to_string())
        }
        Item::Failed(error) => Event::default()
            .event("error")
            .data(envelope::error(id, &error).to_string()),
    }
}

/// An SSE response of `items` to the request `id`: it ends when the sender goes,
/// with a comment every `keep_alive` while nothing happens; `place` (of the process's
/// open responses) is held until it ends.
pub fn sse(
    id: Value,
    items: UnboundedReceiver<Item>,
    keep_alive: Duration,
    place: OwnedSemaphorePermit,
) -> Response {
    let events = futures::stream::unfold((items, place), |(mut items, place)| async move {
        let item = items.recv().await?;
        Some((item, (items, place)))
    })
    .map(move |item| Ok::<_, Infallible>(event(&id, item)));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_late_answer_is_whitespace_then_its_json() {
        let value: Pending = Box::pin(async {
            tokio::time::sleep(Duration::from_millis(120)).await;
            json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        });
        let chunks: Vec<Bytes> = json_body(value, Duration::from_millis(20))
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        assert!(chunks.len() >= 3, "kept alive while it waited: {chunks:?}");
        let body: Vec<u8> = chunks.concat();
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with(' '), "{text:?}");
        let read: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(read["id"], 1);
    }

    #[tokio::test]
    async fn a_ready_answer_is_just_its_json() {
        let value: Pending = Box::pin(async { json!({"a": 1}) });
        let chunks: Vec<Bytes> = json_body(value, Duration::from_secs(5))
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        assert_eq!(chunks, [Bytes::from_static(br#"{"a":1}"#)]);
    }
}
