//! The durable facts of a Session and the bounded snapshot that carries them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::activity::{SessionActivity, SessionProgress};
use crate::bounded::{CommandId, Cursor, EntryId, EventId, ExtensionId, PageLimit, PromptText};
use crate::command::PromptDelivery;
use crate::extension::ExtensionSlotV0;
use crate::message::Message;

/// One exact completed Pi message on the selected lineage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessage {
    /// The lineage entry holding the message.
    pub id: EntryId,
    /// Position in the Session's order.
    pub sequence: u64,
    /// The accepted command whose work produced it; `null` for lines outside work.
    pub command_id: Option<CommandId>,
    /// The message.
    pub value: Message,
}

/// How one accepted work item ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalOutcome {
    /// The model finished.
    Completed,
    /// A cancel or abort stopped it.
    Cancelled,
    /// The model or a tool failed fatally.
    Failed,
    /// The process stopped under it and it could not be resumed.
    Interrupted,
}

impl TerminalOutcome {
    /// The wire word: `completed`, `cancelled`, `failed`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }
}

/// Durable outcome of one accepted work item on the selected lineage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTerminal {
    /// The work item.
    pub command_id: CommandId,
    /// How it ended.
    pub outcome: TerminalOutcome,
    /// Position in the Session's order.
    pub sequence: u64,
    /// What a person should know about the ending, if anything. The key is always
    /// written, `null` when there is nothing to say; a terminal without it is refused
    /// (`diagnostic: string | null` in the seed's grammar).
    #[serde(deserialize_with = "crate::strict::required_nullable")]
    pub diagnostic: Option<String>,
}

/// Where older messages were summarised for the model; the transcript keeps them all.
///
/// `sequence` is the order of the row this marker precedes (ties sort the marker
/// first); `at` is when the compaction ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCompactionMarker {
    /// The marker.
    pub id: EventId,
    /// Order of the row the marker precedes.
    pub sequence: u64,
    /// Unix milliseconds of the compaction.
    pub at: u64,
}

/// A tool's sandbox refused something; shown only to clients that ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxFailureEvent {
    /// The event.
    pub id: EventId,
    /// Position in the Session's order.
    pub sequence: u64,
    /// Unix milliseconds.
    pub at: u64,
    /// The capability that was refused, such as `env.computers.home.run`.
    pub capability: String,
    /// What the sandbox said.
    pub message: String,
}

/// An accepted prompt waiting to enter the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPendingPrompt {
    /// The accepted command.
    pub command_id: CommandId,
    /// The prompt.
    pub text: PromptText,
    /// How it will enter.
    pub delivery: PromptDelivery,
}

/// Bounded view of the waiting prompts, in acceptance order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPendingPrompts {
    /// The first waiting prompts.
    pub prompts: Vec<SessionPendingPrompt>,
    /// More prompts wait than are listed.
    pub has_more: bool,
}

/// Encoded extension slots keyed by extension identity; absent means unavailable.
pub type SessionExtensionSlots = BTreeMap<ExtensionId, ExtensionSlotV0>;

/// A bounded Session baseline at one opaque cursor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The Session.
    pub session_id: crate::bounded::SessionId,
    /// The position this snapshot is taken at; `null` for a Session with no history.
    pub cursor: Option<Cursor>,
    /// Older entries exist before this page.
    pub has_more: bool,
    /// Where the page starts, to read further back with `before`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::nullable"
    )]
    pub oldest_cursor: Option<Option<Cursor>>,
    /// Messages of the page, oldest first.
    pub messages: Vec<SessionMessage>,
    /// Terminals of the page, oldest first.
    pub terminals: Vec<SessionTerminal>,
    /// Compaction markers of the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compactions: Option<Vec<SessionCompactionMarker>>,
    /// Sandbox failures of the page, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_failures: Option<Vec<SandboxFailureEvent>>,
    /// Waiting prompts.
    pub pending: SessionPendingPrompts,
    /// What the Session is doing.
    pub activity: SessionActivity,
    /// The message being streamed, if any.
    pub progress: Option<SessionProgress>,
    /// Extension projections.
    pub extensions: SessionExtensionSlots,
    /// Footer rows of the running extensions (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub footer: crate::footer::SessionFooter,
}

/// Bounded baseline request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadOptions {
    /// Include sandbox failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_sandbox_failures: Option<bool>,
    /// Page size; 50 when absent, at most 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<PageLimit>,
    /// Read the page that ends just before this cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Cursor>,
}

/// Race-safe observation request; the same knobs as a read.
pub type WatchOptions = ReadOptions;

/// Strict-after replay request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeOptions {
    /// Include sandbox failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_sandbox_failures: Option<bool>,
    /// Replay what follows this cursor; live only when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Cursor>,
}
