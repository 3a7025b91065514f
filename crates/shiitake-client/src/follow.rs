//! Following a Session's frames over SSE, reconnecting from the last delivered cursor.
//!
//! A [`Follow`] owns at most one open SSE connection. When the connection
//! drops (the server restarted, a proxy cut it, no byte arrived within the
//! idle timeout) it reconnects after a backoff with `after` = the cursor of the
//! last frame it delivered; the server replays strictly after that cursor, so
//! the caller sees no gap and no duplicate. Progress frames carry no cursor and
//! are not replayed: they are not durable facts. With no cursor yet (a
//! live-only subscription, or a watch of a Session with no history) it
//! reconnects through `watch` and, if history appeared meanwhile, delivers one
//! `reset` frame with the fresh baseline.
//!
//! One event may hold at most [`MAX_EVENT_BYTES`] (4 MiB, the model client's
//! bound): the bytes since the last blank line are counted as they arrive, so a
//! server that never ends an event cannot fill memory. An event past the bound
//! ends the stream with `too_large` (reconnecting would meet it again).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::Method;
use shiitake_protocol::{
    Cursor, FrameStream, ReadOptions, ResetFrame, ResetReason, SessionFrame, SessionId,
    SessionSnapshot, ShiitakeError, parse_shiitake_error,
};

use crate::http::{Inner, QueryPairs};

/// Most bytes of one SSE event (its field lines, without line ends), as the model client allows.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// Why an open stream stopped yielding bytes.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection broke or went quiet: worth a reconnect.
    #[error("{0}")]
    Dropped(String),
    /// One event grew past the bound: final.
    #[error("an SSE event exceeded {0} bytes")]
    TooLarge(usize),
}

type Events = BoxStream<'static, Result<Event, EventStreamError<BodyError>>>;

/// Passes `bytes` through, failing once the bytes since the last blank line exceed `limit`.
fn bounded<S>(bytes: S, limit: usize) -> impl Stream<Item = Result<Bytes, BodyError>>
where
    S: Stream<Item = Result<Bytes, BodyError>>,
{
    let mut since_boundary = 0usize;
    let mut previous_newline = false;
    let mut failed = false;
    bytes.map(move |chunk| {
        if failed {
            return Err(BodyError::TooLarge(limit));
        }
        let chunk = chunk?;
        for &byte in chunk.iter() {
            match byte {
                b'\n' if previous_newline => since_boundary = 0,
                b'\n' => previous_newline = true,
                b'\r' => {}
                _ => {
                    previous_newline = false;
                    since_boundary += 1;
                }
            }
            if since_boundary > limit {
                failed = true;
                return Err(BodyError::TooLarge(limit));
            }
        }
        Ok(chunk)
    })
}

/// Why opening a stream failed: worth retrying, or final.
enum OpenError {
    Retry(ShiitakeError),
    Fatal(ShiitakeError),
}

/// One open SSE connection.
pub(crate) struct Connection {
    events: Events,
}

impl Connection {
    async fn open(inner: &Inner, segments: &[&str], query: &QueryPairs) -> Result<Self, OpenError> {
        let url = inner.url(segments, query).map_err(OpenError::Fatal)?;
        let response = inner
            .send(Method::GET, url, None, "text/event-stream")
            .await
            .map_err(|error| {
                use shiitake_protocol::ErrorCode::{Internal, Unavailable};
                if matches!(error.code, Unavailable | Internal) {
                    OpenError::Retry(error)
                } else {
                    OpenError::Fatal(error)
                }
            })?;
        let idle = inner.options.idle_timeout;
        let bytes = futures::stream::unfold(
            Some(response.bytes_stream().boxed()),
            move |state| async move {
                let mut body = state?;
                match tokio::time::timeout(idle, body.next()).await {
                    Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(body))),
                    Ok(Some(Err(error))) => {
                        Some((Err(BodyError::Dropped(error.to_string())), None))
                    }
                    Ok(None) => None,
                    Err(_) => Some((
                        Err(BodyError::Dropped(
                            "no byte within the idle timeout".to_owned(),
                        )),
                        None,
                    )),
                }
            },
        );
        let events = bounded(bytes, MAX_EVENT_BYTES).eventsource().boxed();
        Ok(Self { events })
    }

    /// The next event; `Ok(None)` when the connection ended or broke (reconnect),
    /// `Err` when an event was over the bound (final).
    async fn next(&mut self) -> Result<Option<Event>, ShiitakeError> {
        match self.events.next().await {
            Some(Ok(event)) => Ok(Some(event)),
            Some(Err(EventStreamError::Transport(BodyError::TooLarge(limit)))) => Err(
                ShiitakeError::too_large(format!("an SSE event exceeded {limit} bytes")),
            ),
            Some(Err(_)) | None => Ok(None),
        }
    }
}

fn sandbox_query(include: Option<bool>) -> QueryPairs {
    match include {
        Some(include) => vec![("includeSandboxFailures", include.to_string())],
        None => Vec::new(),
    }
}

pub(crate) fn read_query(options: &ReadOptions) -> QueryPairs {
    let mut query = sandbox_query(options.include_sandbox_failures);
    if let Some(limit) = options.limit {
        query.push(("limit", limit.get().to_string()));
    }
    if let Some(before) = &options.before {
        query.push(("before", before.as_str().to_owned()));
    }
    query
}

/// Opens `/events?after=` for `session_id`.
async fn open_events(
    inner: &Inner,
    session_id: &SessionId,
    after: Option<&Cursor>,
    include: Option<bool>,
) -> Result<Connection, OpenError> {
    let mut query = sandbox_query(include);
    if let Some(after) = after {
        query.push(("after", after.as_str().to_owned()));
    }
    Connection::open(
        inner,
        &["v1", "sessions", session_id.as_str(), "events"],
        &query,
    )
    .await
}

/// Opens `/watch` and reads its opening `snapshot` event.
async fn open_watch(
    inner: &Inner,
    session_id: &SessionId,
    options: &ReadOptions,
) -> Result<(SessionSnapshot, Connection), OpenError> {
    let segments = ["v1", "sessions", session_id.as_str(), "watch"];
    let mut connection = Connection::open(inner, &segments, &read_query(options)).await?;
    loop {
        let Some(event) = connection.next().await.map_err(OpenError::Fatal)? else {
            return Err(OpenError::Retry(ShiitakeError::unavailable(
                "the watch stream ended before its snapshot",
            )));
        };
        match event.event.as_str() {
            "snapshot" => {
                let snapshot = serde_json::from_str(&event.data).map_err(|error| {
                    OpenError::Fatal(ShiitakeError::internal(format!(
                        "the watch snapshot does not decode: {error}"
                    )))
                })?;
                return Ok((snapshot, connection));
            }
            "error" => return Err(OpenError::Fatal(decode_error(&event.data))),
            _ => continue,
        }
    }
}

fn decode_error(data: &str) -> ShiitakeError {
    parse_shiitake_error(data).unwrap_or_else(|_| {
        ShiitakeError::internal(format!("the server ended the stream with: {data}"))
    })
}

/// The state of one followed frame stream.
pub(crate) struct Follow {
    inner: Arc<Inner>,
    session_id: SessionId,
    include_sandbox_failures: Option<bool>,
    last: Option<Cursor>,
    connection: Option<Connection>,
    failures: u32,
    done: bool,
}

impl Follow {
    /// Subscribes: opens `/events` now (so a failure is the caller's error), follows later.
    pub(crate) async fn subscribe(
        inner: Arc<Inner>,
        session_id: SessionId,
        after: Option<Cursor>,
        include: Option<bool>,
    ) -> Result<FrameStream, ShiitakeError> {
        let connection = open_events(&inner, &session_id, after.as_ref(), include)
            .await
            .map_err(OpenError::into_error)?;
        let follow = Follow {
            inner,
            session_id,
            include_sandbox_failures: include,
            last: after,
            connection: Some(connection),
            failures: 0,
            done: false,
        };
        Ok(follow.into_stream())
    }

    /// Watches: the snapshot and its changes from one server-side watch.
    pub(crate) async fn watch(
        inner: Arc<Inner>,
        session_id: SessionId,
        options: ReadOptions,
    ) -> Result<(SessionSnapshot, FrameStream), ShiitakeError> {
        let (snapshot, connection) = open_watch(&inner, &session_id, &options)
            .await
            .map_err(OpenError::into_error)?;
        let follow = Follow {
            inner,
            session_id,
            include_sandbox_failures: options.include_sandbox_failures,
            last: snapshot.cursor.clone(),
            connection: Some(connection),
            failures: 0,
            done: false,
        };
        Ok((snapshot, follow.into_stream()))
    }

    fn into_stream(self) -> FrameStream {
        futures::stream::unfold(self, |mut follow| async move {
            follow.next_frame().await.map(|item| (item, follow))
        })
        .boxed()
    }

    fn backoff(&self) -> Duration {
        let policy = &self.inner.options.reconnect;
        let exponent = self.failures.min(16);
        policy
            .initial_delay
            .saturating_mul(1u32 << exponent)
            .min(policy.max_delay)
    }

    /// Reconnects; `Some` is a frame to deliver (a reset) or a final error.
    async fn reconnect(&mut self) -> Option<Result<SessionFrame, ShiitakeError>> {
        loop {
            tokio::time::sleep(self.backoff()).await;
            let opened = match &self.last {
                Some(after) => open_events(
                    &self.inner,
                    &self.session_id,
                    Some(after),
                    self.include_sandbox_failures,
                )
                .await
                .map(|connection| (None, connection)),
                None => {
                    let options = ReadOptions {
                        include_sandbox_failures: self.include_sandbox_failures,
                        ..ReadOptions::default()
                    };
                    open_watch(&self.inner, &self.session_id, &options)
                        .await
                        .map(|(snapshot, connection)| (Some(snapshot), connection))
                }
            };
            match opened {
                Ok((baseline, connection)) => {
                    self.failures = 0;
                    self.connection = Some(connection);
                    let baseline = baseline.filter(|baseline| baseline.cursor.is_some())?;
                    self.last = baseline.cursor.clone();
                    return Some(Ok(SessionFrame::Reset(Box::new(ResetFrame {
                        reason: ResetReason::HistoryUnavailable,
                        cursor: baseline.cursor.clone(),
                        baseline,
                    }))));
                }
                Err(OpenError::Fatal(error)) => {
                    self.done = true;
                    return Some(Err(error));
                }
                Err(OpenError::Retry(error)) => {
                    self.failures += 1;
                    if self.failures >= self.inner.options.reconnect.max_attempts {
                        self.done = true;
                        return Some(Err(ShiitakeError::unavailable(format!(
                            "the frame stream could not reconnect after {} attempts: {}",
                            self.failures, error.message
                        ))));
                    }
                }
            }
        }
    }

    async fn next_frame(&mut self) -> Option<Result<SessionFrame, ShiitakeError>> {
        loop {
            if self.done {
                return None;
            }
            let Some(connection) = self.connection.as_mut() else {
                if let Some(delivered) = self.reconnect().await {
                    return Some(delivered);
                }
                continue;
            };
            let event = match connection.next().await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    self.connection = None;
                    continue;
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            };
            match event.event.as_str() {
                "update" | "progress" | "reset" => {
                    let frame: SessionFrame = match serde_json::from_str(&event.data) {
                        Ok(frame) => frame,
                        Err(error) => {
                            self.done = true;
                            return Some(Err(ShiitakeError::internal(format!(
                                "a frame does not decode: {error}"
                            ))));
                        }
                    };
                    if let Some(cursor) = frame.cursor() {
                        self.last = Some(cursor.clone());
                    }
                    return Some(Ok(frame));
                }
                "error" => {
                    self.done = true;
                    return Some(Err(decode_error(&event.data)));
                }
                "end" => {
                    self.done = true;
                    return None;
                }
                _ => continue,
            }
        }
    }
}

impl OpenError {
    fn into_error(self) -> ShiitakeError {
        match self {
            OpenError::Retry(error) | OpenError::Fatal(error) => error,
        }
    }
}

/// The events of `body`, split into `chunk`-byte pieces, through the reader's guard and
/// parser, as `(name, data)`, until the first failure (fuzzing and tests).
pub(crate) fn events_of(body: &[u8], chunk: usize) -> Vec<Result<(String, String), String>> {
    let chunks: Vec<Result<Bytes, BodyError>> = body
        .chunks(chunk.max(1))
        .map(|piece| Ok(Bytes::copy_from_slice(piece)))
        .collect();
    futures::executor::block_on(
        bounded(futures::stream::iter(chunks), MAX_EVENT_BYTES)
            .eventsource()
            .map(|item| {
                item.map(|event| (event.event, event.data))
                    .map_err(|error| error.to_string())
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The events of `body` (sent in 64 KiB chunks) through the guard, until the first failure.
    async fn through_guard(body: Vec<u8>, limit: usize) -> Vec<Result<String, String>> {
        let chunks: Vec<Result<Bytes, BodyError>> = body
            .chunks(64 * 1024)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        bounded(futures::stream::iter(chunks), limit)
            .eventsource()
            .map(|item| {
                item.map(|event| event.data)
                    .map_err(|error| error.to_string())
            })
            .collect()
            .await
    }

    fn event(data_len: usize) -> Vec<u8> {
        let mut body = b"data: ".to_vec();
        body.resize(6 + data_len, b'x');
        body.extend_from_slice(b"\n\n");
        body
    }

    #[tokio::test]
    async fn an_event_at_the_bound_passes_and_one_byte_more_fails() {
        // "data: " counts: 6 bytes of field name.
        let at = event(MAX_EVENT_BYTES - 6);
        let got = through_guard(at, MAX_EVENT_BYTES).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().map(String::len), Ok(MAX_EVENT_BYTES - 6));

        let over = event(MAX_EVENT_BYTES - 5);
        let got = through_guard(over, MAX_EVENT_BYTES).await;
        assert!(
            got.iter()
                .any(|item| item.as_ref().is_err_and(|error| error.contains("exceeded"))),
            "{:?}",
            got.iter()
                .map(|item| item.as_ref().map(String::len))
                .collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn the_bound_is_per_event_not_per_stream() {
        let mut body = Vec::new();
        for _ in 0..3 {
            body.extend(event(1000));
        }
        let got = through_guard(body, 1010).await;
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(Result::is_ok));
    }
}
