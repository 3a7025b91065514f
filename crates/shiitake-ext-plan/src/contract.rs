//! What clients compile against: the wire types, the commands and the bounds.
//! Builds without core (`default-features = false`).

use serde::{Deserialize, Serialize};
use shiitake_protocol::{apply, contract_commands, extension_contract, tool_input};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-plan";
/// The namespace of its tools (`plan.update_plan`) and collections.
pub const NAMESPACE: &str = "plan";
/// Most steps in one plan; 51 is refused.
pub const MAX_STEPS: usize = 50;
/// Longest step text, in UTF-8 bytes.
pub const MAX_STEP_BYTES: usize = 500;
/// Finished and cleared plans kept in the history; the oldest go first.
pub const MAX_HISTORY: usize = 20;
/// Longest `explanation` of `plan.update_plan`.
pub const MAX_EXPLANATION_BYTES: usize = 2000;
/// The label of the footer's clear action.
pub const CLEAR_ACTION_LABEL: &str = "Clear plan";

/// Where one step stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being worked on; at most one step of a plan.
    InProgress,
    /// Done.
    Completed,
}

/// One step of the checklist: the wire shape and the stored row are the same.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanStep {
    /// What the step does.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_STEP_BYTES)))]
    pub step: String,
    /// Where it stands.
    pub status: StepStatus,
}

/// Who cleared a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClearedBy {
    /// The model, with `steps: []`.
    Model,
    /// A person, with `/plan clear` or the footer action.
    Person,
}

/// How a plan left the footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanEnd {
    /// Every step was completed.
    Finished,
    /// It was cleared.
    Cleared {
        /// By whom.
        by: ClearedBy,
    },
}

/// What a human clicks in the footer: an owner command with its input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooterAction {
    /// What the button says.
    pub label: String,
    /// The extension command it calls.
    pub command: String,
    /// The command's input.
    pub input: serde_json::Value,
}

/// The footer row of a live plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFooter {
    /// The plan's revision (one more with every update).
    pub revision: u64,
    /// The step in progress, else the first pending one.
    pub current: Option<String>,
    /// Steps completed.
    pub completed: usize,
    /// Steps in all.
    pub total: usize,
    /// Whether a person opened the full checklist (`/plan`); the next update closes it.
    pub expanded: bool,
    /// The whole checklist, only while expanded.
    pub steps: Option<Vec<PlanStep>>,
    /// The footer's actions (*Clear plan*).
    pub actions: Vec<FooterAction>,
}

/// What the extension publishes per Session: the footer row, absent when no plan is live.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanProjection {
    /// The live plan's footer row.
    pub footer: Option<PlanFooter>,
}

extension_contract! {
    /// The Plan contract, for `bind_session_extension`.
    pub PlanContract = EXTENSION_ID, projection PlanProjection
}

/// What `/plan` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    /// Open the full checklist in the footer.
    #[default]
    Open,
    /// Clear the plan (also the footer's *Clear plan* action).
    Clear,
}

/// The human command `/plan [open|clear]`: the one owner command behind the catalog
/// flow and the footer action.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanCommand {
    /// Open (the default) or clear.
    #[serde(default)]
    pub action: PlanAction,
    /// Makes the command idempotent: an exact retry answers the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// What `/plan` answers: the plan as it stands after the command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The live plan's steps; `None` when no plan is live.
    pub steps: Option<Vec<PlanStep>>,
    /// The live plan's revision.
    pub revision: Option<u64>,
    /// Whether this command cleared a live plan.
    pub cleared: bool,
}

contract_commands!(PlanContract { PlanCommand => "plan" in SessionScope -> PlanView });

/// The input of the model tool `plan.update_plan`.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdatePlan {
    /// The whole checklist, replacing the previous one; [] clears it.
    #[cfg_attr(feature = "runtime", schemars(length(max = MAX_STEPS)))]
    pub steps: Vec<PlanStep>,
    /// Why it changed, for the model's own record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "runtime", schemars(length(max = MAX_EXPLANATION_BYTES)))]
    pub explanation: Option<String>,
}
