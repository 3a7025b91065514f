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
}

impl InvocationContext {
    /// A context with no deadline.
    pub fn new(execution_id: ExecutionId, cancellation: CancellationToken) -> Self {
        Self {
            execution_id,
            cancellation,
            deadline: None,
        }
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
        }
    }
}
