//! What clients compile against: the wire types, the commands and the bounds.
//! Builds without core (`default-features = false`).

use serde::{Deserialize, Serialize};
use shiitake_protocol::{contract_commands, extension_contract};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-agent-almanac";
/// The namespace of its collections and commands.
pub const NAMESPACE: &str = "almanac";
/// Most schedules in one Agent; one more is refused.
pub const MAX_SCHEDULES: usize = 256;
/// Longest scheduled prompt, in UTF-8 bytes.
pub const MAX_PROMPT_BYTES: usize = 4096;
/// Longest cron cadence text, in bytes.
pub const MAX_CADENCE_BYTES: usize = 128;
/// Refused admissions of one occurrence before the schedule stops.
pub const MAX_ATTEMPTS: u32 = 5;
/// The first retry waits this long (ms); each next one twice as long.
pub const RETRY_BASE_MS: u64 = 30_000;
/// The longest wait between retries (ms).
pub const RETRY_CAP_MS: u64 = 60 * 60 * 1000;
/// How far in the past (ms) a one-shot `at` may be and still be taken, as "now": a
/// client's clock and the request's trip may lag. An earlier `at` is refused.
pub const AT_GRACE_MS: u64 = 60_000;

/// A schedule's id (a ULID).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ScheduleId(pub String);

/// When a schedule comes due.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScheduleWhen {
    /// Once, at these Unix milliseconds.
    Once {
        /// The due time.
        at: u64,
    },
    /// On a Unix cron cadence, in UTC.
    Cron {
        /// The cadence, such as `0 9 * * MON-FRI`.
        cadence: String,
    },
}

/// Where a schedule stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleStatus {
    /// Occurrences come.
    Active,
    /// A person paused it.
    Paused,
    /// An occurrence was refused [`MAX_ATTEMPTS`] times; `lastError` says why; resume recovers it.
    Stopped,
    /// A one-shot schedule whose occurrence was admitted.
    Done,
}

/// The door's refusal, as recorded on the schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedError {
    /// The error code, such as `not_found`.
    pub code: String,
    /// What the door said.
    pub message: String,
    /// Unix milliseconds.
    pub at: u64,
}

/// An occurrence being admitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingOccurrence {
    /// The occurrence: its due time, Unix milliseconds.
    pub occurrence: u64,
    /// Refused admissions so far.
    pub attempts: u32,
    /// When the next attempt is due, after a refusal.
    pub retry_at: Option<u64>,
}

/// The last admitted occurrence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastAdmission {
    /// The occurrence's due time.
    pub occurrence: u64,
    /// The command the door accepted.
    pub command_id: String,
}

/// One schedule: the wire shape and the stored row are the same type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Its id.
    pub id: ScheduleId,
    /// The Session it admits into.
    pub session_id: String,
    /// The prompt it admits.
    pub prompt: String,
    /// Once or cron.
    pub when: ScheduleWhen,
    /// Active, paused, stopped or done.
    pub status: ScheduleStatus,
    /// Unix milliseconds it was created.
    pub created_at: u64,
    /// When the next occurrence is due.
    pub next_due: Option<u64>,
    /// The occurrence being admitted (and retried), if any.
    pub pending: Option<PendingOccurrence>,
    /// Occurrences admitted.
    pub admitted: u64,
    /// The last admitted occurrence.
    pub last_admission: Option<LastAdmission>,
    /// The last refusal, kept until an occurrence is admitted.
    pub last_error: Option<RecordedError>,
}

/// What the extension publishes in a Session: the schedules that target it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlmanacProjection {
    /// Schedules admitting into this Session, by id.
    pub schedules: Vec<Schedule>,
}

extension_contract! {
    /// The Almanac contract, for `bind_agent_extension`.
    pub AlmanacContract = EXTENSION_ID, projection AlmanacProjection
}

/// `create`: a one-shot (`at`) or recurring (`cadence`) schedule admitting `prompt` into
/// a Session, which must exist (else `not_found`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSchedule {
    /// The target Session.
    pub session_id: String,
    /// The prompt.
    pub prompt: String,
    /// One-shot due time, Unix milliseconds (exactly one of `at` and `cadence`); at most
    /// [`AT_GRACE_MS`] in the past, when it fires at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
    /// Unix cron cadence in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cadence: Option<String>,
    /// Makes the command idempotent: an exact retry answers the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `list`: every schedule of the Agent, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSchedules {}

/// The input of `pause`, `resume` and `delete`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRef {
    /// The schedule.
    pub schedule_id: ScheduleId,
    /// Makes the command idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `pause`: no occurrence comes until resumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PauseSchedule(pub ScheduleRef);

/// `resume`: recovers a paused or stopped schedule; a refused occurrence is tried again at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResumeSchedule(pub ScheduleRef);

/// `delete`: removes the schedule and its timer; answers whether it existed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeleteSchedule(pub ScheduleRef);

// Every command acts on the whole Agent: the host refuses them on a Session's route.
contract_commands!(AlmanacContract {
    CreateSchedule => "create" in AgentScope -> Schedule,
    ListSchedules => "list" in AgentScope -> Vec<Schedule>,
    PauseSchedule => "pause" in AgentScope -> Schedule,
    ResumeSchedule => "resume" in AgentScope -> Schedule,
    DeleteSchedule => "delete" in AgentScope -> bool,
});
