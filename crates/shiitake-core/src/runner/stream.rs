//! One model call: retries before the first event, progress while streaming.

use futures::StreamExt;
use shiitake_model::{AssistantEvent, Model, ModelContext, ModelErrorKind, ModelOptions};
use shiitake_protocol::message::AssistantMessage;
use shiitake_protocol::{RetryState, SessionProgress, ShiitakeError};
use tracing::Instrument;

use super::RunEvent;
use super::{OwnerLink, RunStart};
use crate::clock::now_ms;

/// What one model call produced.
#[allow(clippy::large_enum_variant)] // moved once through a channel; boxing would only add an allocation
pub(crate) enum Completion {
    /// A complete assistant message (its stop reason may still be `error` or `aborted`),
    /// with the entry id its progress frames announced.
    Message(AssistantMessage, shiitake_protocol::EntryId),
    /// The call failed before streaming, and retrying did not help or was not allowed.
    Failed(String),
    /// The run was cancelled before the message began.
    Cancelled,
}

/// Calls the model, backing off on retryable failures, and streams progress to the owner.
pub(crate) async fn complete(
    start: &RunStart,
    link: &OwnerLink,
    model: &dyn Model,
    context: ModelContext,
    options: &ModelOptions,
) -> Result<Completion, ShiitakeError> {
    let described = model.describe();
    let span = crate::spans::model_call(&described.provider, &described.model);
    complete_in(start, link, model, context, options, &described.provider)
        .instrument(span)
        .await
}

/// [`complete`] inside the model call's span.
async fn complete_in(
    start: &RunStart,
    link: &OwnerLink,
    model: &dyn Model,
    context: ModelContext,
    options: &ModelOptions,
    provider: &str,
) -> Result<Completion, ShiitakeError> {
    let policy = &start.agent.config.retry;
    let mut timing = crate::telemetry::ModelCall::start(provider);
    let mut attempt = 1;
    let mut retrying = false;
    loop {
        let call = model.stream(context.clone(), options.clone(), start.cancel.clone());
        let result = tokio::select! {
            biased;
            () = start.cancel.cancelled() => return Ok(Completion::Cancelled),
            result = call => result,
        };
        match result {
            Ok(events) => {
                if retrying {
                    link.tell(RunEvent::Retry(None)).await;
                }
                let (message, entry_id) = consume(start, link, events, &mut timing).await;
                timing.finished(&message.usage);
                crate::spans::model_finished(
                    &tracing::Span::current(),
                    &message.model,
                    &message.usage,
                    message.stop_reason,
                    attempt,
                );
                crate::spans::model_content(&message);
                return Ok(Completion::Message(message, entry_id));
            }
            Err(error) if error.kind() == ModelErrorKind::Aborted => {
                return Ok(Completion::Cancelled);
            }
            Err(error) if error.retryable() && attempt < policy.max_attempts => {
                attempt += 1;
                let delay = policy.delay(attempt, error.retry_after());
                retrying = true;
                link.tell(RunEvent::Retry(Some(RetryState {
                    attempt,
                    max_attempts: policy.max_attempts,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    error_message: error.to_string(),
                    scheduled_at: now_ms(),
                })))
                .await;
                tokio::select! {
                    biased;
                    () = start.cancel.cancelled() => return Ok(Completion::Cancelled),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            Err(error) => {
                if retrying {
                    link.tell(RunEvent::Retry(None)).await;
                }
                crate::spans::model_failed(&tracing::Span::current(), attempt);
                let attempts = if attempt > 1 {
                    format!(" after {attempt} attempts")
                } else {
                    String::new()
                };
                return Ok(Completion::Failed(format!(
                    "the model call failed{attempts}: {error}"
                )));
            }
        }
    }
}

/// Reads the stream to its final message, publishing bounded progress on the way.
async fn consume(
    start: &RunStart,
    link: &OwnerLink,
    mut events: shiitake_model::AssistantStream,
    timing: &mut crate::telemetry::ModelCall,
) -> (AssistantMessage, shiitake_protocol::EntryId) {
    let mut progress = Progress::new(start.agent.config.progress_limit_bytes);
    while let Some(event) = events.next().await {
        // The provider's `start` is not a token: the first content (or the end) is.
        if !matches!(event, AssistantEvent::Start) {
            timing.first_event();
        }
        match event {
            AssistantEvent::TextDelta { delta, .. } => {
                if let Some(update) = progress.text(&delta) {
                    link.tell(RunEvent::Progress(update)).await;
                }
            }
            AssistantEvent::ThinkingDelta { delta, .. } => {
                if let Some(update) = progress.thinking(&delta) {
                    link.tell(RunEvent::Progress(update)).await;
                }
            }
            AssistantEvent::Done { message, .. } => return (message, progress.current.message_id),
            AssistantEvent::Error { error, .. } => return (error, progress.current.message_id),
            _ => {}
        }
    }
    // Providers always end with done or error; a stream that does not is a broken provider.
    (broken_stream_message(), progress.current.message_id)
}

fn broken_stream_message() -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: Default::default(),
        stop_reason: shiitake_protocol::message::StopReason::Error,
        error_message: Some("the model stream ended without a final message".to_owned()),
        timestamp: now_ms(),
        extra: Default::default(),
    }
}

/// Progress of one streaming message: text and thinking kept up to a byte bound.
struct Progress {
    limit: usize,
    current: SessionProgress,
}

impl Progress {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            current: SessionProgress {
                message_id: crate::ids::entry_id(),
                revision: 0,
                text: String::new(),
                thinking: String::new(),
                text_truncated: false,
                thinking_truncated: false,
            },
        }
    }

    fn text(&mut self, delta: &str) -> Option<SessionProgress> {
        if self.current.text_truncated {
            return None;
        }
        self.current.text_truncated = append_bounded(&mut self.current.text, delta, self.limit);
        self.bump()
    }

    fn thinking(&mut self, delta: &str) -> Option<SessionProgress> {
        if self.current.thinking_truncated {
            return None;
        }
        self.current.thinking_truncated =
            append_bounded(&mut self.current.thinking, delta, self.limit);
        self.bump()
    }

    fn bump(&mut self) -> Option<SessionProgress> {
        self.current.revision += 1;
        Some(self.current.clone())
    }

    #[cfg(test)]
    fn message_id(&self) -> &shiitake_protocol::EntryId {
        &self.current.message_id
    }
}

/// Appends as much of `delta` as fits in `limit` bytes, cutting at a character
/// boundary; returns whether anything was cut.
fn append_bounded(buffer: &mut String, delta: &str, limit: usize) -> bool {
    let room = limit.saturating_sub(buffer.len());
    if delta.len() <= room {
        buffer.push_str(delta);
        return false;
    }
    let mut cut = room;
    while !delta.is_char_boundary(cut) {
        cut -= 1;
    }
    buffer.push_str(&delta[..cut]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_keeps_the_head_and_flags_the_cut() {
        let mut progress = Progress::new(5);
        assert_eq!(
            progress.text("abc").map(|p| (p.text, p.text_truncated)),
            Some(("abc".into(), false))
        );
        let update = progress.text("déf").unwrap();
        // "abc" + "d" fits in 5 bytes; "é" is two bytes and would not.
        assert_eq!(
            (update.text.as_str(), update.text_truncated, update.revision),
            ("abcd", true, 2)
        );
        assert!(
            progress.text("more").is_none(),
            "nothing is published after the cut"
        );
        let thinking = progress.thinking("hmm").unwrap();
        assert_eq!((thinking.thinking.as_str(), thinking.revision), ("hmm", 3));
        assert!(!progress.message_id().as_str().is_empty());
    }

    #[test]
    fn progress_at_exactly_its_bound_is_not_truncated_and_one_byte_more_is() {
        let mut progress = Progress::new(5);
        let full = progress.text("abcde").unwrap();
        assert_eq!((full.text.as_str(), full.text_truncated), ("abcde", false));
        let over = progress.text("f").unwrap();
        assert_eq!((over.text.as_str(), over.text_truncated), ("abcde", true));
    }

    #[test]
    fn append_bounded_never_splits_a_character() {
        let mut buffer = String::new();
        assert!(append_bounded(&mut buffer, "漢字", 4));
        assert_eq!(buffer, "漢");
    }
}
