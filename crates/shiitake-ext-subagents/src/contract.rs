//! What clients compile against: the footer's wire types, the rows that show them
//! ([`FooterView::footer_rows`]), the `/agents` command and the bounds. Builds without
//! core (`default-features = false`).
//!
//! ```
//! use shiitake_ext_subagents::contract::{FooterView, SubagentsContract, ToggleRows};
//! use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension, view};
//!
//! async fn collapse<S: shiitake_protocol::SessionApi>(session: &S)
//!     -> Result<bool, shiitake_protocol::ShiitakeError> {
//!     let toggled = bind_session_extension::<_, SubagentsContract>(session)
//!         .call(&ToggleRows { collapsed: Some(true) })
//!         .await?;
//!     Ok(toggled.collapsed)
//! }
//!
//! fn footer(slots: &shiitake_protocol::SessionExtensionSlots) -> Option<FooterView> {
//!     match view::<SubagentsContract>(slots).ok()? {
//!         ExtensionViewV0::Running { value } => value,
//!         _ => None,
//!     }
//! }
//! ```

mod rows;

use serde::{Deserialize, Serialize};
use shiitake_protocol::{contract_commands, extension_contract};

pub use rows::{CHILD_ROW_KIND, MORE_ROW_KIND, SUMMARY_ROW_KIND};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-subagents";
/// Its namespace (it offers no tools).
pub const NAMESPACE: &str = "subagents";
/// Rows read per Session; the Agents beyond them are counted in [`FooterView::more`].
pub const MAX_ROWS: usize = 8;
/// Rows are refreshed when a watcher reads the parent and they are at least this old.
pub const REFRESH_AFTER_MS: u64 = 1_000;
/// While a row is working or waiting, rows are read again this often...
pub const POLL_EVERY_MS: u64 = 5_000;
/// ...until nobody has read the parent Session for this long.
pub const QUIET_AFTER_MS: u64 = 30_000;
/// Longest question text a row carries, in characters (the rest is cut with `…`).
pub const MAX_QUESTION_CHARS: usize = 300;
/// The label of a row's answer action.
pub const ANSWER_ACTION_LABEL: &str = "Answer";
/// The question extension whose `/answer` flow the answer action runs.
pub const QUESTION_EXTENSION_ID: &str = shiitake_ext_question::contract::EXTENSION_ID;
/// The question extension's flow command for `/answer`.
pub const QUESTION_ANSWER_FLOW: &str = "answer_flow";
/// The question extension's command the flow ends with.
pub const QUESTION_ANSWER_CALL: &str = "answer";
/// The approval extension whose `/approve` flow a waiting tool call's Answer action runs.
pub const APPROVAL_EXTENSION_ID: &str = shiitake_ext_approval::contract::EXTENSION_ID;
/// The approval extension's flow command for `/approve`.
pub const APPROVAL_ANSWER_FLOW: &str = shiitake_ext_approval::contract::ANSWER_FLOW;
/// The approval extension's command the flow ends with.
pub const APPROVAL_ANSWER_CALL: &str = "answer";
/// Longest text of a waiting tool call a row carries, in characters.
pub const MAX_APPROVAL_CHARS: usize = 200;

extension_contract! {
    /// The subagents contract, for `bind_session_extension` and `view`.
    pub SubagentsContract = EXTENSION_ID, projection FooterView
}

/// What the extension publishes per Session: its sub-agent rows, or one summary row
/// when a person collapsed them. `null` while the Session sent work to nobody.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooterView {
    /// `/agents` collapsed the rows: show [`Self::summary`] only (`rows` is empty).
    pub collapsed: bool,
    /// One row per Agent, newest first (empty while collapsed).
    pub rows: Vec<ChildRow>,
    /// Counts by status, for the collapsed summary row.
    pub summary: FooterSummary,
    /// Agents beyond the rows read ([`MAX_ROWS`]).
    pub more: u32,
    /// When the rows were read, Unix milliseconds (the Agent's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed_at: Option<u64>,
}

/// The collapsed summary: how many rows are in each status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooterSummary {
    /// Rows read.
    pub total: u32,
    /// Working.
    pub working: u32,
    /// Waiting on an Agent (counted apart: calm, not a person's business yet).
    pub waiting: u32,
    /// Needing a person.
    pub needs_you: u32,
    /// Idle.
    pub idle: u32,
    /// Failed.
    pub failed: u32,
    /// Whose state could not be read.
    pub unavailable: u32,
    /// Amber only when a child needs a person.
    pub tone: Tone,
}

/// How loud the collapsed summary is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    /// Nothing needs a person.
    #[default]
    Calm,
    /// A child needs a person.
    Amber,
}

/// One Agent this Session sent work to or created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildRow {
    /// The child Agent's name; a row opens that Agent's conversation.
    pub agent: String,
    /// The child's Session the work went to.
    pub session_id: String,
    /// Its title, when it has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Its live status.
    pub status: ChildStatus,
}

/// A child's live status, read from its own Session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChildStatus {
    /// Its work runs (or is queued).
    Working,
    /// A question waits on the Agent that sent the work: `waiting on <agent>`.
    WaitingOn {
        /// The Agent it waits on.
        agent: String,
    },
    /// Attention waits on a person: a question (with its text and the Answer action),
    /// a tool call waiting for approval (likewise), or other attention (both absent).
    NeedsYou {
        /// The question that needs a person, when it is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<NeedsYouQuestion>,
        /// The tool call waiting for a person's approval, when it is one (and no
        /// question needs the person); boxed, as rows without one are the many.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<Box<NeedsYouApproval>>,
    },
    /// Its last work completed (or it never ran).
    Idle,
    /// Its last work failed or was interrupted.
    Failed,
    /// Its state could not be read; never shown as idle.
    Unavailable {
        /// Why, for a tooltip.
        reason: String,
    },
}

impl ChildStatus {
    /// Whether the rows are polled while this row is shown (working or waiting).
    pub fn is_live(&self) -> bool {
        matches!(self, Self::Working | Self::WaitingOn { .. })
    }

    /// The footer's words for it: `working`, `waiting on <agent>`, `needs you`, ...
    pub fn label(&self) -> String {
        match self {
            Self::Working => "working".into(),
            Self::WaitingOn { agent } => format!("waiting on {agent}"),
            Self::NeedsYou { .. } => "needs you".into(),
            Self::Idle => "idle".into(),
            Self::Failed => "failed".into(),
            Self::Unavailable { .. } => "unavailable".into(),
        }
    }
}

/// The question a `needs you` row shows, with the one action that answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedsYouQuestion {
    /// The Ask.
    pub ask_id: String,
    /// Its first question, at most [`MAX_QUESTION_CHARS`] characters.
    pub text: String,
    /// The Answer action.
    pub answer: AnswerAction,
}

/// Runs the question extension's own `/answer` conversation on the child's Session: a
/// client calls `flow` there (with `askId` preset) until it confirms, then `call`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerAction {
    /// What the button says ([`ANSWER_ACTION_LABEL`]).
    pub label: String,
    /// The child Agent.
    pub agent: String,
    /// The child's Session.
    pub session_id: String,
    /// The question extension ([`QUESTION_EXTENSION_ID`]).
    pub extension_id: String,
    /// Its flow command ([`QUESTION_ANSWER_FLOW`]).
    pub flow: String,
    /// Its answer command ([`QUESTION_ANSWER_CALL`]).
    pub call: String,
    /// The Ask, preset as the flow's `askId` argument.
    pub ask_id: String,
}

/// The tool call a `needs you` row shows, with the one action that answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedsYouApproval {
    /// The approval.
    pub approval_id: String,
    /// What waits: `approve files__apply_patch? {…}`, at most [`MAX_APPROVAL_CHARS`]
    /// characters.
    pub text: String,
    /// The Answer action.
    pub answer: ApprovalAnswerAction,
}

/// Runs the approval extension's own `/approve` conversation on the child's Session: a
/// client calls `flow` there (with `approvalId` preset) until it confirms, then `call`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAnswerAction {
    /// What the button says ([`ANSWER_ACTION_LABEL`]).
    pub label: String,
    /// The child Agent.
    pub agent: String,
    /// The child's Session.
    pub session_id: String,
    /// The approval extension ([`APPROVAL_EXTENSION_ID`]).
    pub extension_id: String,
    /// Its flow command ([`APPROVAL_ANSWER_FLOW`]).
    pub flow: String,
    /// Its answer command ([`APPROVAL_ANSWER_CALL`]).
    pub call: String,
    /// The approval, preset as the flow's `approvalId` argument.
    pub approval_id: String,
}

/// `/agents`: collapses the rows to one summary row, or expands them again; per
/// Session and in memory. Without `collapsed` it toggles.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToggleRows {
    /// `true` collapses, `false` expands, absent toggles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collapsed: Option<bool>,
}

contract_commands!(SubagentsContract { ToggleRows => "toggle" in SessionScope -> Toggled });

/// What `/agents` answers: whether the rows are collapsed now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toggled {
    /// Collapsed now.
    pub collapsed: bool,
}
