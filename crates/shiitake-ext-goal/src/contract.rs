//! The goal contract: what clients compile against, without shiitake-core.
//!
//! The [`Goal`] row is both the durable row and the wire shape. Its `pauseCause` is
//! `{kind, detail}` while paused and `null` otherwise; `kind` is the closed
//! [`PauseKind`], `detail` display text only. Human commands are typed
//! [`ContractCommand`](shiitake_protocol::extension::ContractCommand)s; the projection carries the goal, the footer state and the
//! command ids of goal turns, so a client can show them as compact notes. The footer
//! row every client shows of it is [`footer_row`].
//!
//! ```
//! use shiitake_ext_goal::contract::{GoalContract, SetGoal};
//! use shiitake_protocol::extension::bind_session_extension;
//!
//! async fn pursue<S: shiitake_protocol::SessionApi>(session: &S)
//!     -> Result<u64, shiitake_protocol::ShiitakeError> {
//!     let goal = bind_session_extension::<_, GoalContract>(session)
//!         .call(&SetGoal { objective: "Ship the release notes".into(), replace_revision: None,
//!                          request_id: Some("set-1".into()) })
//!         .await?;
//!     Ok(goal.revision)
//! }
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use shiitake_protocol::{contract_commands, extension_contract};

mod footer;

pub use footer::{FOOTER_KIND, Footer, PAUSED_TEXT, PURSUING_TEXT, clock_time, footer_row};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-goal";
/// The namespace of its tools: `goal.create`, `goal.get`, `goal.complete`, `goal.block`.
pub const NAMESPACE: &str = "goal";
/// The state version: 6, which discards the disposable preview rows of 4 and 5.
pub const STATE_VERSION: u32 = 6;

/// Longest objective, in UTF-8 bytes.
pub const MAX_OBJECTIVE_BYTES: usize = 2000;
/// Longest completion summary or block reason, in UTF-8 bytes.
pub const MAX_NOTE_BYTES: usize = 1000;
/// Tool-less continuations in a row that pause a goal as stalled.
pub const STALL_LIMIT: u8 = 3;
/// Goal turns (continuations) a goal takes, by default, between becoming live and
/// pausing as stalled: a host bound on what a model that never finishes can cost.
pub const DEFAULT_MAX_GOAL_TURNS: u32 = 50;
/// Tokens its goal turns use, by default, between becoming live and pausing as
/// stalled (as the provider reports them; a provider that reports none is bound by
/// turns alone).
pub const DEFAULT_MAX_GOAL_TOKENS: u64 = 4_000_000;
/// How often a goal waiting on a sub-agent command looks again, in milliseconds.
pub const RECHECK_MS: u64 = 60_000;
/// Bound of the goal-context prompt section (every run), in UTF-8 bytes.
pub const CONTEXT_SECTION_BYTES: usize = 2560;
/// Bound of the continuation-directive prompt section (goal turns only), in UTF-8 bytes.
pub const DIRECTIVE_SECTION_BYTES: usize = 1024;
/// Goal turns the projection marks (the most recent).
pub const MAX_MARKED_TURNS: usize = 64;
/// Finished goals kept in state (the most recent).
pub const MAX_HISTORY: usize = 20;
/// Sub-agent commands recorded at once.
pub const MAX_AGENT_COMMANDS: usize = 32;

/// The attention kind a blocked goal raises (`inbox: false`).
pub const ATTENTION_BLOCKED: &str = "goal-blocked";
/// The attention kind a stalled goal raises (`inbox: false`).
pub const ATTENTION_STALLED: &str = "goal-stalled";
/// The attention kind a goal waiting on a sub-agent command raises (`inbox: false`).
pub const ATTENTION_WAITING: &str = "goal-waiting";

extension_contract! {
    /// The goal contract, for `bind_session_extension`.
    pub GoalContract = EXTENSION_ID, projection GoalProjection
}

/// A goal's id: `goal_` followed by a ULID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GoalId(String);

impl GoalId {
    /// Wraps an id (minted by the extension, or read from the wire).
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GoalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a goal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// The agent works on it; continuations are admitted.
    Live,
    /// Nothing continues it until it is resumed (see `pauseCause`).
    Paused,
    /// Done: the model completed it and its run settled successfully.
    Achieved,
    /// A person cleared or replaced it, or the model replaced one that paused on its own.
    Cleared,
}

impl GoalStatus {
    /// Live or paused: the Session's one goal.
    pub fn is_active(self) -> bool {
        matches!(self, GoalStatus::Live | GoalStatus::Paused)
    }

    /// Its wire name (`live`), as refusals and the `/goal` flow say it.
    pub fn name(self) -> &'static str {
        match self {
            GoalStatus::Live => "live",
            GoalStatus::Paused => "paused",
            GoalStatus::Achieved => "achieved",
            GoalStatus::Cleared => "cleared",
        }
    }
}

/// Why a goal paused: the closed set of kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseKind {
    /// A person paused it (`/goal pause`).
    Person,
    /// The model blocked it (`goal.block`) and that run settled successfully.
    Blocked,
    /// Three continuations in a row called no tool, or the goal's turns reached the
    /// host's bound (on turns or tokens, named by the detail).
    Stalled,
    /// A person stopped a turn (Esc) or cancelled queued work.
    Cancelled,
    /// A turn of the Session failed.
    Failed,
    /// A turn ended without a terminal of its own: it could not resume after a restart.
    NoTerminal,
}

impl PauseKind {
    /// Paused by a person (paused or stopped): the model may then only complete it.
    pub fn by_person(self) -> bool {
        matches!(self, PauseKind::Person | PauseKind::Cancelled)
    }

    /// The attention kind this pause raises: only blocked and stalled goals ask for a person.
    pub fn attention(self) -> Option<&'static str> {
        match self {
            PauseKind::Blocked => Some(ATTENTION_BLOCKED),
            PauseKind::Stalled => Some(ATTENTION_STALLED),
            _ => None,
        }
    }
}

/// Why a goal is paused: a kind to decide on, a detail to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseCause {
    /// The discriminator.
    pub kind: PauseKind,
    /// Display text, never a discriminator.
    pub detail: Option<String>,
}

/// Who set a goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetBy {
    /// A person, through the contract or `/goal`.
    Person,
    /// The model, through `goal.create`.
    Model,
}

/// What the model asked for, pending the successful settlement of its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisionalAction {
    /// `goal.complete`: achieved once the run completes.
    Complete,
    /// `goal.block`: paused as blocked once the run completes.
    Block,
}

/// A completion or block the model asked for; it takes effect only when the run
/// that asked settles successfully, and is dropped otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provisional {
    /// Complete or block.
    pub action: ProvisionalAction,
    /// The run (command id) that asked.
    pub run: String,
    /// The completion summary or the block reason.
    pub note: Option<String>,
}

/// The Session's goal: the durable row and the wire shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Goal {
    /// Its id.
    pub goal_id: GoalId,
    /// What to achieve.
    pub objective: String,
    /// Live, paused, achieved or cleared.
    pub status: GoalStatus,
    /// Why it is paused; `null` unless paused.
    pub pause_cause: Option<PauseCause>,
    /// Goes up with every change of status, objective, pause cause or provisional
    /// outcome, and across goals: a newer goal always has a higher revision.
    pub revision: u64,
    /// Who set it.
    pub set_by: SetBy,
    /// Unix milliseconds it was set.
    pub created_at: u64,
    /// Unix milliseconds it last became live; `null` unless live.
    pub live_since: Option<u64>,
    /// Unix milliseconds it was achieved or cleared.
    pub ended_at: Option<u64>,
    /// The model's pending completion or block.
    pub provisional: Option<Provisional>,
    /// Tool-less continuations in a row.
    pub stalls: u8,
    /// Continuations admitted for it so far.
    pub continuations: u64,
    /// What its goal turns used since it last became live, against the host's bound.
    #[serde(default)]
    pub spent: Spent,
    /// A tool-less goal turn ended while a sub-agent command was live: the goal
    /// waits for it instead of counting a stall.
    pub waiting: bool,
}

/// What a goal's turns used since it last became live (set or resumed): goal turns
/// that settled, and the tokens their model reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spent {
    /// Goal turns that settled.
    pub turns: u32,
    /// Tokens those turns' model answers reported (`usage.totalTokens`).
    pub tokens: u64,
}

/// A sub-agent command this Session sent, as the roster recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCommand {
    /// The command id the child's Session gave the work.
    pub command_id: String,
    /// The child Agent, by name.
    pub agent: String,
    /// Unix milliseconds it was sent.
    pub sent_at: u64,
    /// Where it is.
    pub state: AgentCommandState,
}

/// Where a recorded sub-agent command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentCommandState {
    /// The child works on it.
    Live,
    /// The child's work settled.
    Settled,
    /// The child replied.
    Replied,
}

/// What the extension publishes per Session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalProjection {
    /// The live or paused goal, or the last finished one (`null` before any).
    pub goal: Option<Goal>,
    /// The footer: only while a goal is live or paused.
    pub footer: Option<Footer>,
    /// Command ids of goal turns (most recent last): clients show their messages as a
    /// compact note instead of the transcript.
    pub turns: Vec<String>,
    /// Sub-agent commands recorded as live.
    pub waiting_on: Vec<AgentCommand>,
}

/// The Session's goal as it stands (`null` before any).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetGoal {}

/// Sets a goal. Replacing a live or paused goal asks first: send the revision you
/// were shown as `replaceRevision`, so a newer goal is never replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetGoal {
    /// What to achieve, 1 to [`MAX_OBJECTIVE_BYTES`] bytes.
    pub objective: String,
    /// The revision of the live or paused goal this replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_revision: Option<u64>,
    /// Stable per request: reuse it after an uncertain response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Pauses, resumes or clears the goal; `revision`, when given, must be the current one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalChange {
    /// The revision the person saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Stable per request: reuse it after an uncertain response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Pauses the live goal (cause `person`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PauseGoal(pub GoalChange);

/// Resumes the paused goal, whatever paused it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResumeGoal(pub GoalChange);

/// Clears the live or paused goal (only a person clears a live goal).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClearGoal(pub GoalChange);

/// What `/goal` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalAction {
    /// Set (or replace) the goal.
    Set,
    /// Pause it.
    Pause,
    /// Resume it.
    Resume,
    /// Clear it.
    Clear,
}

/// The `/goal` catalog command: one action with its arguments (`revision` is the
/// observed revision; for `set` it is the revision of the goal being replaced).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalCommand {
    /// What to do.
    pub action: GoalAction,
    /// The objective, for `set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// The revision the person saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Stable per request: reuse it after an uncertain response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

// The human commands, all on one Session.
contract_commands!(GoalContract {
    GetGoal => "get" in SessionScope -> Option<Goal>,
    SetGoal => "set" in SessionScope -> Goal,
    PauseGoal => "pause" in SessionScope -> Goal,
    ResumeGoal => "resume" in SessionScope -> Goal,
    ClearGoal => "clear" in SessionScope -> Goal,
    GoalCommand => "goal" in SessionScope -> Goal,
});

/// The input of `goal.get`: nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GetInput {}

/// The input of `goal.create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateInput {
    /// What to achieve (at most 2000 bytes of UTF-8).
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_OBJECTIVE_BYTES)))]
    pub objective: String,
}

/// The input of `goal.complete`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteInput {
    /// What was achieved, in a sentence or two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Absent, never null, as the model is told.
    #[cfg_attr(
        feature = "runtime",
        schemars(with = "String", length(min = 1, max = MAX_NOTE_BYTES))
    )]
    pub summary: Option<String>,
}

/// The input of `goal.block`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockInput {
    /// What a person must do or decide.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_NOTE_BYTES)))]
    pub reason: String,
}

/// Why a text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Empty or only whitespace.
    #[error("the {0} is empty")]
    Blank(&'static str),
    /// Over its bound.
    #[error("the {what} is {len} bytes, more than {max}")]
    TooLong {
        /// Which text.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
}

/// Checks an objective: not blank, at most [`MAX_OBJECTIVE_BYTES`]; answers it trimmed.
pub fn objective(text: &str) -> Result<String, TextError> {
    bounded(text, "objective", MAX_OBJECTIVE_BYTES)
}

/// Checks a summary or reason: not blank, at most [`MAX_NOTE_BYTES`]; answers it trimmed.
pub fn note(text: &str, what: &'static str) -> Result<String, TextError> {
    bounded(text, what, MAX_NOTE_BYTES)
}

fn bounded(text: &str, what: &'static str, max: usize) -> Result<String, TextError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(TextError::Blank(what));
    }
    if trimmed.len() > max {
        return Err(TextError::TooLong {
            what,
            len: trimmed.len(),
            max,
        });
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn goal(status: GoalStatus, pause_cause: Option<PauseCause>) -> Goal {
        Goal {
            goal_id: GoalId::new("goal_1"),
            objective: "Ship it".into(),
            status,
            pause_cause,
            revision: 3,
            set_by: SetBy::Person,
            created_at: 1_000,
            live_since: Some(1_764_508_920_000),
            ended_at: None,
            provisional: None,
            stalls: 0,
            continuations: 0,
            spent: Spent::default(),
            waiting: false,
        }
    }

    #[test]
    fn pause_cause_is_null_while_live_and_kind_detail_while_paused() {
        let live = serde_json::to_value(goal(GoalStatus::Live, None)).unwrap();
        assert_eq!(live["pauseCause"], json!(null));
        let paused = goal(
            GoalStatus::Paused,
            Some(PauseCause {
                kind: PauseKind::NoTerminal,
                detail: None,
            }),
        );
        let value = serde_json::to_value(&paused).unwrap();
        assert_eq!(
            value["pauseCause"],
            json!({"kind": "no-terminal", "detail": null})
        );
        assert_eq!(serde_json::from_value::<Goal>(value).unwrap(), paused);
        for kind in [
            "person",
            "blocked",
            "stalled",
            "cancelled",
            "failed",
            "no-terminal",
        ] {
            let decoded: PauseKind = serde_json::from_value(json!(kind)).unwrap();
            assert_eq!(serde_json::to_value(decoded).unwrap(), json!(kind));
        }
        assert!(serde_json::from_value::<PauseKind>(json!("asleep")).is_err());
    }

    #[test]
    fn texts_are_bounded_in_bytes_at_the_edge() {
        let exact = "é".repeat(MAX_OBJECTIVE_BYTES / 2);
        assert_eq!(objective(&exact).unwrap(), exact);
        let over = format!("{exact}a");
        assert_eq!(
            objective(&over),
            Err(TextError::TooLong {
                what: "objective",
                len: MAX_OBJECTIVE_BYTES + 1,
                max: MAX_OBJECTIVE_BYTES
            })
        );
        assert_eq!(objective("  \n"), Err(TextError::Blank("objective")));
        assert_eq!(
            note(&"r".repeat(MAX_NOTE_BYTES), "reason").unwrap().len(),
            MAX_NOTE_BYTES
        );
        assert!(note(&"r".repeat(MAX_NOTE_BYTES + 1), "reason").is_err());
    }

    #[test]
    fn only_blocked_and_stalled_pauses_raise_attention() {
        let raised: Vec<_> = [
            PauseKind::Person,
            PauseKind::Blocked,
            PauseKind::Stalled,
            PauseKind::Cancelled,
            PauseKind::Failed,
            PauseKind::NoTerminal,
        ]
        .into_iter()
        .filter_map(PauseKind::attention)
        .collect();
        assert_eq!(raised, vec![ATTENTION_BLOCKED, ATTENTION_STALLED]);
    }
}
