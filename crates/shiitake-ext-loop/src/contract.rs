//! What clients compile against: the wire types, the commands and the bounds.
//! Builds without core (`default-features = false`).

use serde::{Deserialize, Serialize};
use shiitake_protocol::{apply, contract_commands, extension_contract, tool_input};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-loop";
/// The namespace of its tools (`loop.get` ...) and collections.
pub const NAMESPACE: &str = "loop";
/// A cron loop expires this long after it starts: seven days, in milliseconds.
pub const CRON_LIFETIME_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Longest repeated prompt, in UTF-8 bytes.
pub const MAX_PROMPT_BYTES: usize = 4096;
/// Longest cron cadence text, in bytes.
pub const MAX_CADENCE_BYTES: usize = 128;
/// Longest wait `loop.schedule_next` may ask for: seven days, in seconds.
pub const MAX_DELAY_SECONDS: u64 = 7 * 24 * 60 * 60;

/// How a loop repeats.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoopMode {
    /// On a fixed Unix cron cadence (UTC), through a core timer; expires seven days after it starts.
    Cron {
        /// The cadence, such as `*/30 * * * *`.
        cadence: String,
    },
    /// Each occurrence's own run asks for the next with `loop.schedule_next`; omitting it ends the loop.
    SelfPaced,
}

/// Where a loop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopStatus {
    /// Occurrences come.
    Active,
    /// No occurrence comes until it is resumed.
    Paused,
    /// Over; a new loop may start.
    Ended,
}

/// Who stopped a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    /// A person, with `/loop stop`.
    Person,
    /// The model, with `loop.stop`.
    Model,
}

/// Why a loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum LoopEnd {
    /// Stopped on purpose.
    Stopped {
        /// By whom.
        by: StoppedBy,
    },
    /// A cron loop reached seven days.
    Expired,
    /// A self-paced occurrence's run ended without `loop.schedule_next`.
    NoNextOccurrence,
}

/// The loop of a Session: the wire shape and the stored row are the same type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopRecord {
    /// A ULID; runs of the loop carry `loop:<id>:<occurrence>` as correlation.
    pub id: String,
    /// The repeated prompt.
    pub prompt: String,
    /// Cron or self-paced.
    pub mode: LoopMode,
    /// Active, paused or ended.
    pub status: LoopStatus,
    /// Unix milliseconds it started.
    pub started_at: u64,
    /// When a cron loop expires (`startedAt` + seven days).
    pub expires_at: Option<u64>,
    /// Occurrences admitted so far.
    pub occurrences: u64,
    /// The occurrence admitted and not yet settled (queued or running).
    pub in_flight: Option<u64>,
    /// Occurrences that came due while one was in flight: recorded, not stacked.
    pub skipped: u64,
    /// When the next occurrence is due, when known.
    pub next_due: Option<u64>,
    /// The wait the current self-paced run asked for, in milliseconds.
    pub next_requested_ms: Option<u64>,
    /// Why it ended.
    pub end: Option<LoopEnd>,
}

/// What the extension publishes per Session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopProjection {
    /// The Session's loop (the last one, when it ended); `None` when none ever started.
    #[serde(rename = "loop")]
    pub current: Option<LoopRecord>,
}

extension_contract! {
    /// The Loop contract, for `bind_session_extension`.
    pub LoopContract = EXTENSION_ID, projection LoopProjection
}

/// What `/loop` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopAction {
    /// Start a loop (`prompt`, and `cadence` for a cron loop).
    Start,
    /// Pause the loop.
    Pause,
    /// Resume a paused loop.
    Resume,
    /// Stop the loop.
    Stop,
}

/// The human command `/loop <start|pause|resume|stop>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopCommand {
    /// What to do.
    pub action: LoopAction,
    /// The repeated prompt (start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A Unix cron cadence (start); without it the loop is self-paced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cadence: Option<String>,
    /// Makes the command idempotent: an exact retry answers the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

contract_commands!(LoopContract { LoopCommand => "loop" in SessionScope -> LoopProjection });

/// The input of `loop.start`: the prompt to repeat and, for a cron loop, its cadence.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartLoop {
    /// The repeated prompt.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_PROMPT_BYTES)))]
    pub prompt: String,
    /// A Unix cron cadence; without it the loop is self-paced.
    // Advertised as a plain string: leaving it out is the only way to say "none".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "runtime",
        schemars(with = "String", length(min = 1, max = MAX_CADENCE_BYTES))
    )]
    pub cadence: Option<String>,
}

/// The input of `loop.schedule_next`: how long after this run the next occurrence comes.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleNext {
    /// Seconds from the end of this run to the next occurrence, at most 604800 (seven days).
    #[cfg_attr(feature = "runtime", schemars(range(min = 0, max = MAX_DELAY_SECONDS)))]
    pub delay_seconds: u64,
}
