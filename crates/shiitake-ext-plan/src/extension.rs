//! The Plan extension on core's extension API.

use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, StateScope,
    StateView, Tx,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::Catalog;

use crate::contract::{
    CLEAR_ACTION_LABEL, ClearedBy, EXTENSION_ID, FooterAction, NAMESPACE, PlanAction, PlanCommand,
    PlanFooter, PlanProjection, PlanView, StepStatus,
};
use crate::state::{self, CURRENT, Change, HISTORY, HistoryEntry, PlanRecord};

/// Collection and key of the last revision used, so revisions grow across plans.
const REVISION: (&str, &str) = ("plan", "revision");

/// The Plan extension; add it with [`plan_grants`].
pub struct PlanExtension {
    definition: ExtensionDefinition,
}

impl PlanExtension {
    /// The extension with its definition.
    pub fn new() -> Result<Self, HookError> {
        let id = ExtensionId::new(EXTENSION_ID)
            .map_err(|error| HookError::Invalid(error.to_string()))?;
        Ok(Self {
            definition: ExtensionDefinition {
                id,
                namespace: NAMESPACE.into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
        })
    }
}

/// Exactly what the host grants Plan: its state, its projection, the prompt section,
/// its tool and the human `/plan` command.
pub fn plan_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Projection)
        .with(Grant::Prompt)
        .with(Grant::Tools)
        .with(Grant::Commands)
}

fn current(tx: &Tx<'_>) -> Result<Option<PlanRecord>, HookError> {
    tx.get(StateScope::Session, CURRENT.0, CURRENT.1)
}

/// Writes a change: the live plan, the revision counter and the history (bounded).
pub(crate) fn apply(tx: &mut Tx<'_>, change: Change) -> Result<(), HookError> {
    let last: u64 = tx
        .get(StateScope::Session, REVISION.0, REVISION.1)?
        .unwrap_or(0);
    let mut revision = last;
    match &change.current {
        Some(plan) => {
            revision = revision.max(plan.revision);
            tx.put(StateScope::Session, CURRENT.0, CURRENT.1, plan)?;
        }
        None => tx.delete(StateScope::Session, CURRENT.0, CURRENT.1)?,
    }
    if let Some(ended) = &change.ended {
        revision = revision.max(ended.revision);
        let keys = tx
            .scan::<HistoryEntry>(StateScope::Session, HISTORY)?
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        for old in state::history_overflow(keys) {
            tx.delete(StateScope::Session, HISTORY, &old)?;
        }
        tx.put(
            StateScope::Session,
            HISTORY,
            &state::history_key(ended.revision),
            ended,
        )?;
    }
    if revision != last {
        tx.put(StateScope::Session, REVISION.0, REVISION.1, &revision)?;
    }
    Ok(())
}

/// `plan.update_plan` inside the owner transaction.
pub(crate) fn update_plan(
    tx: &mut Tx<'_>,
    steps: Vec<crate::contract::PlanStep>,
) -> Result<Value, HookError> {
    let live = current(tx)?;
    let last: u64 = tx
        .get(StateScope::Session, REVISION.0, REVISION.1)?
        .unwrap_or(0);
    let change = state::update(live.as_ref(), last, steps, tx.now())
        .map_err(|error| HookError::Invalid(error.to_string()))?;
    let answer = match (&change.current, &change.ended) {
        (Some(plan), _) => json!({"status": "updated", "revision": plan.revision}),
        (None, Some(ended)) => {
            json!({"status": "ended", "end": ended.end, "revision": ended.revision})
        }
        (None, None) => json!({"status": "cleared", "revision": null}),
    };
    apply(tx, change)?;
    Ok(answer)
}

fn view(plan: Option<&PlanRecord>, cleared: bool) -> PlanView {
    PlanView {
        steps: plan.map(|p| p.steps.clone()),
        revision: plan.map(|p| p.revision),
        cleared,
    }
}

fn footer(plan: &PlanRecord) -> PlanFooter {
    PlanFooter {
        revision: plan.revision,
        current: state::current_step(&plan.steps).map(|s| s.step.clone()),
        completed: plan
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Completed)
            .count(),
        total: plan.steps.len(),
        expanded: plan.expanded,
        steps: plan.expanded.then(|| plan.steps.clone()),
        actions: vec![FooterAction {
            label: CLEAR_ACTION_LABEL.into(),
            command: "plan".into(),
            input: json!({"action": "clear"}),
        }],
    }
}

impl Extension for PlanExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `/plan [open|clear]`, also the footer's *Clear plan* action.
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        if command != "plan" {
            return Err(HookError::UnknownCommand(command.to_owned()));
        }
        let input: PlanCommand = serde_json::from_value(input)
            .map_err(|error| HookError::Invalid(format!("/plan: {error}")))?;
        let live = current(tx)?;
        let answer = match input.action {
            PlanAction::Open => {
                let opened = state::open(live.as_ref());
                if let Some(plan) = &opened {
                    tx.put(StateScope::Session, CURRENT.0, CURRENT.1, plan)?;
                }
                view(opened.as_ref(), false)
            }
            PlanAction::Clear => {
                let cleared = live.is_some();
                apply(tx, state::clear(live.as_ref(), ClearedBy::Person, tx.now()))?;
                view(None, cleared)
            }
        };
        serde_json::to_value(answer).map_err(|error| HookError::Failed(error.to_string()))
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let plan: Option<PlanRecord> = state.get(StateScope::Session, CURRENT.0, CURRENT.1);
        let projection = PlanProjection {
            footer: plan.as_ref().map(footer),
        };
        serde_json::to_value(projection).ok()
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let plan: Option<PlanRecord> = run.state.get(StateScope::Session, CURRENT.0, CURRENT.1);
        Contribution {
            prompt_section: plan.as_ref().map(crate::tools::prompt_section),
            tools: crate::tools::module(tools),
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(crate::catalog::catalog(self.definition.id.clone()))
    }
}
