//! Drives a provider's SSE response into assistant events, with cancellation.
//!
//! The body goes through a size guard (one SSE event may not exceed
//! [`HttpLimits::max_event_bytes`](crate::HttpLimits)), then
//! `eventsource-stream` parses it, then a provider [`Decoder`] turns each event
//! into [`MessageBuilder`] calls. The first event is read before `stream`
//! returns, so an empty body or an error event in place of the answer is an
//! `Err` the runner can classify; after that every failure is an `error` event.

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use reqwest::Response;
use shiitake_protocol::message::StopReason;
use tokio_util::sync::CancellationToken;

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::http::{aborted, describe};
use crate::model::AssistantStream;

/// What a decoder says after one event.
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// The message is complete; stop reading.
    Finished,
}

/// A provider's wire format: turns SSE events into builder calls.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event; `Err` ends the message with an error.
    fn event(&mut self, event: &Event, out: &mut MessageBuilder) -> Result<Flow, ModelError>;

    /// Called when the body ends before [`Flow::Finished`]; `Err` when that means truncation.
    fn end(&mut self, out: &mut MessageBuilder) -> Result<(), ModelError>;
}

/// A body failure: transport, or an event beyond the size bound.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The connection failed or timed out.
    #[error("{}", describe(.0))]
    Transport(#[from] reqwest::Error),
    /// One SSE event exceeded the bound.
    #[error("an SSE event exceeded {0} bytes")]
    TooLarge(usize),
}

type Events = BoxStream<'static, Result<Event, EventStreamError<BodyError>>>;

/// Guards the body: counts bytes since the last blank line and fails past `limit`.
fn bounded_events(response: Response, limit: usize) -> Events {
    let mut since_boundary = 0usize;
    let mut previous_newline = false;
    let mut failed = false;
    let guarded = response
        .bytes_stream()
        .map(move |chunk| -> Result<Bytes, BodyError> {
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
        });
    guarded.eventsource().boxed()
}

fn body_error(error: &EventStreamError<BodyError>) -> ModelError {
    match error {
        EventStreamError::Transport(BodyError::Transport(inner)) => {
            crate::http::transport_error(inner)
        }
        other => ModelError::new(ModelErrorKind::InvalidResponse, other.to_string()),
    }
}

/// The state of one streaming response.
struct Driver<D> {
    events: Option<Events>,
    decoder: D,
    builder: MessageBuilder,
    cancel: CancellationToken,
}

impl<D: Decoder> Driver<D> {
    /// Feeds one item; afterwards the builder may have queued events or finished.
    fn feed(&mut self, item: Option<Result<Event, EventStreamError<BodyError>>>) {
        let result = match item {
            None => {
                self.events = None;
                self.decoder.end(&mut self.builder).map(|()| Flow::Finished)
            }
            Some(Err(error)) => Err(body_error(&error)),
            Some(Ok(event)) => self.decoder.event(&event, &mut self.builder),
        };
        match result {
            Ok(Flow::Continue) if !self.builder.is_finished() => {}
            Ok(_) => {
                self.events = None;
                self.builder.finish();
            }
            Err(error) => {
                self.events = None;
                self.builder.fail(StopReason::Error, error.to_string());
            }
        }
    }

    async fn next(mut self) -> Option<(crate::event::AssistantEvent, Self)> {
        loop {
            if let Some(event) = self.builder.pop() {
                return Some((event, self));
            }
            if self.builder.is_finished() {
                return None;
            }
            let Some(events) = self.events.as_mut() else {
                self.builder
                    .fail(StopReason::Error, "the response ended unexpectedly");
                continue;
            };
            let item = tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    // Dropping the body closes the connection before the event is seen.
                    self.events = None;
                    self.builder.fail(StopReason::Aborted, "aborted while the model was streaming");
                    continue;
                }
                item = events.next() => item,
            };
            self.feed(item);
        }
    }
}

/// Reads the first event of `response` and returns the stream of the rest.
///
/// Before the first event decodes, failures (empty body, transport, an error
/// event) are returned as `Err`, classified.
pub(crate) async fn start<D: Decoder>(
    response: Response,
    decoder: D,
    builder: MessageBuilder,
    cancel: CancellationToken,
    max_event_bytes: usize,
) -> Result<AssistantStream, ModelError> {
    let mut events = bounded_events(response, max_event_bytes);
    // Keep-alive comments and empty events do not count as the answer starting.
    let first = loop {
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(aborted()),
            item = events.next() => item,
        };
        match &item {
            Some(Ok(event)) if event.data.trim().is_empty() => {}
            _ => break item,
        }
    };
    let mut driver = Driver {
        events: Some(events),
        decoder,
        builder,
        cancel,
    };
    match first {
        None => {
            return Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                "the server answered 200 with an empty stream (no SSE event)",
            ));
        }
        Some(Err(error)) => return Err(body_error(&error)),
        Some(Ok(event)) => match driver.decoder.event(&event, &mut driver.builder) {
            Err(error) => return Err(error),
            Ok(Flow::Continue) if !driver.builder.is_finished() => {}
            Ok(_) => {
                driver.events = None;
                driver.builder.finish();
            }
        },
    }
    Ok(stream::unfold(driver, Driver::next).fuse().boxed())
}
