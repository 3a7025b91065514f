//! Frames as Server-Sent Events.
//!
//! Each frame is one event: its name is the frame's `kind` (`update`,
//! `progress`, `reset`), its data the frame's JSON, and its id the frame's
//! cursor. Progress frames carry no cursor, so they go without an id and a
//! client's `Last-Event-ID` stays at the last durable position. A failure ends
//! the stream with one `error` event (a `ShiitakeError`); an Agent that closes
//! ends it with one `end` event, so a client can tell a finished stream from a
//! dropped connection.
//!
//! Backpressure: axum pulls the next frame only when the socket has drained the
//! previous one, so nothing queues here. A subscriber that falls behind lags in
//! the Agent's bounded broadcast channel, which turns the lag into one `reset`.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures::stream::{self, BoxStream, StreamExt};
use shiitake_protocol::{FrameStream, SessionFrame, SessionSnapshot, ShiitakeError};

/// The SSE body of a subscription.
pub(crate) type EventStream = Sse<KeepAliveStream<BoxStream<'static, Result<Event, Infallible>>>>;

fn error_event(error: &ShiitakeError) -> Event {
    let data = serde_json::to_string(error)
        .unwrap_or_else(|_| r#"{"code":"internal","message":"unencodable error"}"#.to_owned());
    Event::default().event("error").data(data)
}

/// One frame as one event.
pub(crate) fn frame_event(frame: &SessionFrame) -> Event {
    let kind = match frame {
        SessionFrame::Update(_) => "update",
        SessionFrame::Progress(_) => "progress",
        SessionFrame::Reset(_) => "reset",
    };
    match serde_json::to_string(frame) {
        Ok(data) => {
            let event = Event::default().event(kind).data(data);
            match frame.cursor() {
                Some(cursor) => event.id(cursor.as_str()),
                None => event,
            }
        }
        Err(error) => error_event(&ShiitakeError::internal(format!(
            "a frame did not encode: {error}"
        ))),
    }
}

/// The `snapshot` event that opens a watch: the baseline, with its cursor as id.
pub(crate) fn snapshot_event(snapshot: &SessionSnapshot) -> Event {
    match serde_json::to_string(snapshot) {
        Ok(data) => {
            let event = Event::default().event("snapshot").data(data);
            match &snapshot.cursor {
                Some(cursor) => event.id(cursor.as_str()),
                None => event,
            }
        }
        Err(error) => error_event(&ShiitakeError::internal(format!(
            "a snapshot did not encode: {error}"
        ))),
    }
}

/// The SSE response: `first` events, then the frames, then `end` (or one `error`).
pub(crate) fn respond(first: Vec<Event>, frames: FrameStream, keep_alive: Duration) -> EventStream {
    // A comment first, so the response head and a first byte leave at once.
    let opening = std::iter::once(Event::default().comment("ok")).chain(first);
    let body = frames
        .scan(false, |failed, item| {
            let next = if *failed {
                None
            } else {
                match item {
                    Ok(frame) => Some(frame_event(&frame)),
                    Err(error) => {
                        *failed = true;
                        Some(error_event(&error))
                    }
                }
            };
            futures::future::ready(next)
        })
        .chain(stream::once(async {
            Event::default().event("end").data("")
        }));
    let events = stream::iter(opening).chain(body).map(Ok).boxed();
    Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
}
