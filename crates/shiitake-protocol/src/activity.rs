//! What a Session is doing right now: raw facts a client interprets.

use serde::{Deserialize, Serialize};

use crate::bounded::{CommandId, EntryId};

/// The head of the Session's work queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum QueueState {
    /// Nothing is queued or running.
    #[default]
    Idle,
    /// Work is accepted and waiting to start.
    #[serde(rename_all = "camelCase")]
    Queued {
        /// The command at the head of the queue.
        command_id: CommandId,
    },
    /// Work is running.
    #[serde(rename_all = "camelCase")]
    Running {
        /// The running command.
        command_id: CommandId,
    },
}

/// A model call that failed retryably and will be tried again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryState {
    /// The attempt that will run next, from 1.
    pub attempt: u32,
    /// The attempt after which the run fails.
    pub max_attempts: u32,
    /// How long the runner waits before the attempt.
    pub delay_ms: u64,
    /// What failed.
    pub error_message: String,
    /// Unix milliseconds at which the retry was scheduled.
    pub scheduled_at: u64,
}

/// The Session's work waits for its store: a commit failed for a reason that passes
/// (a lost connection, a database restarting, a full disk), and its owner goes on from
/// the last committed point by itself once the store takes writes again. Only the
/// owner's process knows it (nothing can be stored while it lasts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageWait {
    /// Unix milliseconds since which the work waits.
    pub since: u64,
    /// Attempts to go on made so far.
    pub attempts: u32,
    /// Unix milliseconds at which the next attempt is due at the latest.
    pub next_attempt_at: u64,
    /// What the store said.
    pub error_message: String,
}

/// Raw facts about what a Session is doing now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionActivity {
    /// Queue head.
    pub queue: QueueState,
    /// An abort or cancel of the running work was requested and has not finished.
    pub cancellation_requested: bool,
    /// The pending retry of a model call, if any.
    pub retry: Option<RetryState>,
    /// The tool running now, by its model-facing name.
    pub active_tool: Option<String>,
    /// Sequence of the last committed assistant message of the current run.
    pub last_model_choice_sequence: Option<u64>,
    /// Set while the work waits for the store; absent otherwise (an addition to the
    /// seed's shape: clients that do not know it see the same object as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_wait: Option<StorageWait>,
    /// What the running tool says of itself (a command's latest output); absent when it
    /// says nothing (an addition to the seed's shape, like `storageWait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_output: Option<ToolOutput>,
}

/// The latest output of the running tool (a command's), process-local and never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The tool, by its model-facing name.
    pub tool: String,
    /// The end of its output so far, at most [`TOOL_OUTPUT_BYTES`] bytes.
    pub text: String,
    /// Bytes of output so far; `text` is their end.
    pub total_bytes: u64,
}

/// The most bytes of a running tool's output a frame carries.
pub const TOOL_OUTPUT_BYTES: usize = 4096;

/// Process-local progress of the assistant message being streamed; never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionProgress {
    /// The entry the message will have once committed.
    pub message_id: EntryId,
    /// Grows by one with every published update of this message.
    pub revision: u64,
    /// Visible text so far, possibly truncated.
    pub text: String,
    /// Thinking so far, possibly truncated.
    pub thinking: String,
    /// `text` was cut to its bound.
    pub text_truncated: bool,
    /// `thinking` was cut to its bound.
    pub thinking_truncated: bool,
}
