//! The invocation context every operation call receives: who, until when, and how to stop.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Identifies one execution of one operation (the runner uses the tool call id).
///
/// It is the key of replay decisions after a crash, so it is a newtype rather
/// than a bare string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExecutionId(String);

impl ExecutionId {
    /// Wraps an id chosen by the caller, such as a tool call id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// A fresh ULID, for callers without an id of their own.
    pub fn generate() -> Self {
        Self(ulid::Ulid::generate().to_string())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Everything an operation call knows about its circumstances.
///
/// The cancellation token is shared by the whole run, so one cancel reaches
/// every tool; the optional deadline bounds this call. The execute door
/// enforces both even when an operation ignores them, and hands the operation
/// a child token that is also cancelled when the call's deadline passes.
#[derive(Debug, Clone)]
pub struct InvocationContext {
    execution_id: ExecutionId,
    cancellation: CancellationToken,
    deadline: Option<Instant>,
    newer_input: NewerInput,
    progress: Progress,
}

/// What a running call says of itself while it runs, such as the latest output of a
/// command: shown to the Session's clients, never stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressNote {
    /// The latest text (a command's last output), bounded by whoever shows it.
    pub text: String,
    /// Bytes the call produced so far, of which `text` is the end.
    pub total_bytes: u64,
}

/// Where a running call reports its progress. Only the latest report counts: the caller
/// reads it at its own pace, so a call may report as often as it likes.
#[derive(Debug, Clone, Default)]
pub struct Progress(Option<std::sync::Arc<tokio::sync::watch::Sender<ProgressNote>>>);

impl Progress {
    /// Reports go to `sender`.
    pub fn new(sender: tokio::sync::watch::Sender<ProgressNote>) -> Self {
        Self(Some(std::sync::Arc::new(sender)))
    }

    /// Whether anyone reads the reports (otherwise a call need not make them).
    pub fn is_wanted(&self) -> bool {
        self.0.is_some()
    }

    /// Reports `note`, replacing the previous one.
    pub fn report(&self, note: ProgressNote) {
        if let Some(sender) = &self.0 {
            sender.send_replace(note);
        }
    }
}

/// Tells a long-waiting operation that newer input waits for the caller, such as a
/// person's steer while a tool waits for an answer, so it can return early instead
/// of holding the run.
///
/// It is a hint, not a cancellation: an operation that ignores it still finishes
/// normally. The runner raises it; an operation reads it with
/// [`InvocationContext::newer_input`].
#[derive(Debug, Clone, Default)]
pub struct NewerInput(Option<tokio::sync::watch::Receiver<bool>>);

impl NewerInput {
    /// A signal that follows `receiver`: raised while it holds `true`.
    pub fn new(receiver: tokio::sync::watch::Receiver<bool>) -> Self {
        Self(Some(receiver))
    }

    /// Whether newer input waits now.
    pub fn is_raised(&self) -> bool {
        self.0.as_ref().is_some_and(|receiver| *receiver.borrow())
    }

    /// Resolves once newer input waits; never resolves for a context without a signal.
    pub async fn raised(&self) {
        let Some(receiver) = &self.0 else {
            return std::future::pending().await;
        };
        let mut receiver = receiver.clone();
        if receiver.wait_for(|raised| *raised).await.is_err() {
            // The runner is gone; nothing newer can arrive.
            std::future::pending::<()>().await;
        }
    }
}

impl InvocationContext {
    /// A context with no deadline.
    pub fn new(execution_id: ExecutionId, cancellation: CancellationToken) -> Self {
        Self {
            execution_id,
            cancellation,
            deadline: None,
            newer_input: NewerInput::default(),
            progress: Progress::default(),
        }
    }

    /// Attaches where the call reports its progress.
    #[must_use]
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    /// Where the call reports its progress (see [`Progress`]).
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Attaches the signal that tells this call newer input waits.
    #[must_use]
    pub fn with_newer_input(mut self, newer_input: NewerInput) -> Self {
        self.newer_input = newer_input;
        self
    }

    /// The signal that newer input waits for the caller (see [`NewerInput`]).
    pub fn newer_input(&self) -> &NewerInput {
        &self.newer_input
    }

    /// Sets the instant by which the call must finish.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the deadline `timeout` from now.
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.with_deadline(Instant::now() + timeout)
    }

    /// The execution's id.
    pub fn execution_id(&self) -> &ExecutionId {
        &self.execution_id
    }

    /// The token that cancels this call (the run's token, or a child of it inside an operation).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline (zero once past it); `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The same context with another token; the door gives each call a child token.
    pub(crate) fn with_token(&self, cancellation: CancellationToken) -> Self {
        Self {
            execution_id: self.execution_id.clone(),
            cancellation,
            deadline: self.deadline,
            newer_input: self.newer_input.clone(),
            progress: self.progress.clone(),
        }
    }
}

#[cfg(test)]
mod newer_input_tests {
    use super::*;

    #[tokio::test]
    async fn newer_input_follows_its_sender_and_never_fires_without_one() {
        let (raise, receiver) = tokio::sync::watch::channel(false);
        let context = InvocationContext::new(ExecutionId::new("e"), CancellationToken::new())
            .with_newer_input(NewerInput::new(receiver));
        assert!(!context.newer_input().is_raised());
        let waiting = context.newer_input().clone();
        let waiter = tokio::spawn(async move { waiting.raised().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        raise.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("raised in time")
            .expect("joined");
        assert!(context.newer_input().is_raised());

        let plain = InvocationContext::new(ExecutionId::new("p"), CancellationToken::new());
        assert!(!plain.newer_input().is_raised());
        let never = tokio::time::timeout(Duration::from_millis(20), plain.newer_input().raised());
        assert!(
            never.await.is_err(),
            "a context without a signal never raises"
        );
    }
}
