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

/// One frame as one event, or why it did not encode.
fn frame_event(frame: &SessionFrame) -> Result<Event, ShiitakeError> {
    let kind = crate::telemetry::frame_kind(frame);
    let event = Event::default()
        .event(kind)
        .json_data(frame)
        .map_err(|error| ShiitakeError::internal(format!("a frame did not encode: {error}")))?;
    Ok(match frame.cursor() {
        Some(cursor) => event.id(cursor.as_str()),
        None => event,
    })
}

/// The `end` event. Its data is `{}` rather than empty: SSE parsers drop an
/// event whose data is empty, and the client would take the close for a drop.
fn end_event() -> Event {
    Event::default().event("end").data("{}")
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

/// The SSE response: `first` events, then the frames, then `end`; or, on a
/// failure, one `error` instead of `end`. `place` (the stream's place among the
/// bounded subscribers) is held until the stream is dropped.
pub(crate) fn respond<P: Send + 'static>(
    first: Vec<Event>,
    frames: FrameStream,
    keep_alive: Duration,
    place: P,
) -> EventStream {
    // A comment first, so the response head and a first byte leave at once.
    for _ in &first {
        crate::telemetry::sent("snapshot");
    }
    let opening = std::iter::once(Event::default().comment("ok")).chain(first);
    let subscribed = crate::telemetry::Subscribed::new();
    let body = stream::unfold(Some(frames), |state| async move {
        let mut frames = state?;
        match frames.next().await {
            Some(Ok(frame)) => match frame_event(&frame) {
                Ok(event) => {
                    crate::telemetry::sent(crate::telemetry::frame_kind(&frame));
                    Some((event, Some(frames)))
                }
                Err(error) => Some((error_event(&error), None)),
            },
            Some(Err(error)) => Some((error_event(&error), None)),
            None => Some((end_event(), None)),
        }
    });
    let events = stream::iter(opening)
        .chain(body)
        .map(move |event| {
            let _held = (&place, &subscribed);
            Ok(event)
        })
        .boxed();
    Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::response::IntoResponse;

    /// The whole SSE body of `frames`, as text.
    async fn body_of(frames: FrameStream) -> String {
        let response = respond(Vec::new(), frames, Duration::from_secs(60), ()).into_response();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// The events an SSE parser dispatches from `body`: (name, data).
    async fn parsed(body: String) -> Vec<(String, String)> {
        use eventsource_stream::Eventsource;
        stream::once(async move { Ok::<_, Infallible>(body) })
            .eventsource()
            .map(|event| {
                let event = event.unwrap();
                (event.event, event.data)
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn an_empty_frame_stream_ends_with_an_end_event_a_parser_sees() {
        let body = body_of(stream::empty().boxed()).await;
        assert_eq!(body, ": ok\n\nevent: end\ndata: {}\n\n");
        let events = parsed(body).await;
        assert_eq!(events, vec![("end".to_owned(), "{}".to_owned())]);
    }

    #[tokio::test]
    async fn a_frame_is_one_event_named_by_kind_with_its_json_and_cursor() {
        let fixtures = [
            include_str!("../../shiitake-protocol/tests/fixtures/session_frame/progress.json"),
            include_str!("../../shiitake-protocol/tests/fixtures/session_frame/reset.json"),
            include_str!("../../shiitake-protocol/tests/fixtures/session_frame/update_live.json"),
            include_str!("../../shiitake-protocol/tests/fixtures/session_frame/update_replay.json"),
        ];
        for fixture in fixtures {
            let frame: SessionFrame = serde_json::from_str(fixture).unwrap();
            let kind = match &frame {
                SessionFrame::Update(_) => "update",
                SessionFrame::Progress(_) => "progress",
                SessionFrame::Reset(_) => "reset",
            };
            let id = frame
                .cursor()
                .map(|cursor| format!("id: {}\n", cursor.as_str()))
                .unwrap_or_default();
            let json = serde_json::to_string(&frame).unwrap();
            let expected =
                format!(": ok\n\nevent: {kind}\ndata: {json}\n{id}\nevent: end\ndata: {{}}\n\n");
            let body = body_of(stream::iter([Ok(frame)]).boxed()).await;
            assert_eq!(body, expected);
        }
    }

    #[tokio::test]
    async fn a_failed_stream_ends_with_its_error_and_no_end() {
        let frames = stream::iter([Err(ShiitakeError::internal("broken"))]).boxed();
        let events = parsed(body_of(frames).await).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].0, "error");
        let error: ShiitakeError = serde_json::from_str(&events[0].1).unwrap();
        assert_eq!(error.message, "broken");
    }
}
