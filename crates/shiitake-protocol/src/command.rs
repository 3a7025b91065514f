//! Commands a Session accepts and the answers it gives.

use serde::{Deserialize, Serialize};

use crate::bounded::{CommandId, EntryId, PromptText, RequestId, SessionId};

/// How an accepted prompt enters the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PromptDelivery {
    /// Waits its turn, in acceptance order, until the current work is done.
    #[serde(rename = "followUp")]
    FollowUp,
    /// Enters the running work at its next model-call boundary, or starts a run when idle.
    #[serde(rename = "steer")]
    Steer,
}

/// Who wrote an operator line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorAuthor {
    /// The person operating the Agent.
    Operator,
    /// Another party in the conversation.
    Party,
}

/// One type-discriminated Session command, exactly as it travels on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SessionCommand {
    /// Accept a prompt as queued work.
    #[serde(rename_all = "camelCase")]
    Prompt {
        /// Idempotency key of the caller.
        request_id: RequestId,
        /// What to ask.
        text: PromptText,
        /// Follow-up or steer.
        delivery: PromptDelivery,
    },
    /// Cancel one accepted command, or learn that it is too late.
    #[serde(rename_all = "camelCase")]
    Cancel {
        /// The command to cancel.
        command_id: CommandId,
        /// Cancel only if the command has not started yet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        only_if_pending: Option<bool>,
    },
    /// Stop the active run.
    Abort,
    /// Select a lineage leaf: later work continues from that entry.
    #[serde(rename_all = "camelCase")]
    Branch {
        /// The entry to continue from.
        entry_id: EntryId,
    },
    /// Copy the lineage from the root to one entry into a new Session.
    #[serde(rename_all = "camelCase")]
    Fork {
        /// The last entry to copy.
        entry_id: EntryId,
    },
    /// Record an operator or party line without starting a run.
    #[serde(rename_all = "camelCase")]
    Operator {
        /// Idempotency key of the caller.
        request_id: RequestId,
        /// Who wrote the line.
        author: OperatorAuthor,
        /// The line.
        text: PromptText,
    },
}

/// Acknowledgement returned after one durable acceptance commit:
/// `{"status": "accepted", "commandId": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "StatusWire", try_from = "StatusWire")]
pub struct Accepted {
    /// The id the Session gave the accepted command.
    pub command_id: CommandId,
}

/// Cancelling found nothing left to cancel: an ordinary outcome, never an error.
///
/// The command is unknown to this Session, has already started (for an
/// `onlyIfPending` cancel) or has already settled. On the wire:
/// `{"status": "too_late", "commandId": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "StatusWire", try_from = "StatusWire")]
pub struct TooLate {
    /// The command the cancel named.
    pub command_id: CommandId,
}

/// Outcome of one cancel command: accepted, or too late.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "StatusWire", from = "StatusWire")]
pub enum CancelResult {
    /// The cancel was accepted.
    Accepted(Accepted),
    /// Nothing was left to cancel.
    TooLate(TooLate),
}

/// The one wire grammar behind [`Accepted`], [`TooLate`] and [`CancelResult`].
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum StatusWire {
    Accepted {
        #[serde(rename = "commandId")]
        command_id: CommandId,
    },
    TooLate {
        #[serde(rename = "commandId")]
        command_id: CommandId,
    },
}

impl From<Accepted> for StatusWire {
    fn from(value: Accepted) -> Self {
        StatusWire::Accepted {
            command_id: value.command_id,
        }
    }
}

impl From<TooLate> for StatusWire {
    fn from(value: TooLate) -> Self {
        StatusWire::TooLate {
            command_id: value.command_id,
        }
    }
}

impl From<CancelResult> for StatusWire {
    fn from(value: CancelResult) -> Self {
        match value {
            CancelResult::Accepted(accepted) => accepted.into(),
            CancelResult::TooLate(too_late) => too_late.into(),
        }
    }
}

impl From<StatusWire> for CancelResult {
    fn from(value: StatusWire) -> Self {
        match value {
            StatusWire::Accepted { command_id } => CancelResult::Accepted(Accepted { command_id }),
            StatusWire::TooLate { command_id } => CancelResult::TooLate(TooLate { command_id }),
        }
    }
}

impl TryFrom<StatusWire> for Accepted {
    type Error = &'static str;

    fn try_from(value: StatusWire) -> Result<Self, Self::Error> {
        match value {
            StatusWire::Accepted { command_id } => Ok(Accepted { command_id }),
            StatusWire::TooLate { .. } => Err("expected status \"accepted\", found \"too_late\""),
        }
    }
}

impl TryFrom<StatusWire> for TooLate {
    type Error = &'static str;

    fn try_from(value: StatusWire) -> Result<Self, Self::Error> {
        match value {
            StatusWire::TooLate { command_id } => Ok(TooLate { command_id }),
            StatusWire::Accepted { .. } => Err("expected status \"too_late\", found \"accepted\""),
        }
    }
}

/// Result returned after a fork commits a new Session.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedSession {
    /// The new Session.
    pub session_id: SessionId,
}

/// What executing one [`SessionCommand`] produced; its form follows the command's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandOutcome {
    /// A prompt was accepted.
    Accepted(Accepted),
    /// A cancel was accepted or was too late.
    Cancel(CancelResult),
    /// A fork created a Session.
    Forked(ForkedSession),
    /// An abort, branch or operator line was recorded; there is nothing to return.
    Done,
}

/// Optional controls for [`crate::SessionApi::send`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendOptions {
    /// Follow-up (the default) or steer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<PromptDelivery>,
    /// Idempotency key; one is minted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

/// Input of [`crate::SessionApi::cancel`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelInput {
    /// The command to cancel.
    pub command_id: CommandId,
    /// Cancel only if it has not started yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_if_pending: Option<bool>,
}
