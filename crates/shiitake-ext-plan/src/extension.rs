//! The Plan extension on core's extension API.

use serde_json::{Value, json};
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{HookError, StateScope, StateView, Tx};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0};

use crate::contract::{
    CLEAR_ACTION_LABEL, ClearedBy, FooterAction, NAMESPACE, PlanAction, PlanCommand, PlanContract,
    PlanFooter, PlanProjection, PlanView, StepStatus,
};
use crate::state::{self, CURRENT, Change, HISTORY, HistoryEntry, PlanRecord};

/// Collection and key of the last revision used, so revisions grow across plans.
const REVISION: (&str, &str) = ("plan", "revision");

/// The Plan extension: its `/plan` command, its `plan.update_plan` tool, the
/// projection, the footer row and the prompt section, declared to core's kit.
pub fn extension() -> Result<KitExtension<PlanContract>, KitError> {
    ExtensionKit::<PlanContract>::new(NAMESPACE)?
        .session_state()
        .command(plan_command)
        .tool(crate::tools::update_plan()?)
        .tools_description("The Session's plan.")
        .prompt(|run| live(&run.state).as_ref().map(crate::tools::prompt_section))
        .projection(|state| {
            Some(PlanProjection {
                footer: live(state).as_ref().map(footer),
            })
        })
        .footer(|state, id| {
            live(state)
                .map(|plan| footer_row(&plan, id))
                .into_iter()
                .collect()
        })
        .catalog(crate::catalog::catalog)
        .build()
}

fn live(state: &StateView<'_>) -> Option<PlanRecord> {
    state.get(StateScope::Session, CURRENT.0, CURRENT.1)
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

/// `/plan [open|clear]`, also the footer's *Clear plan* action.
fn plan_command(tx: &mut Tx<'_>, input: PlanCommand) -> Result<PlanView, HookError> {
    let live = current(tx)?;
    Ok(match input.action {
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
    })
}

/// The live plan's footer row: progress, the current step, the checklist while a
/// person has it open, and the *Checklist* and *Clear plan* actions.
fn footer_row(plan: &PlanRecord, id: &ExtensionId) -> FooterRowV0 {
    let summary = footer(plan);
    let current = summary
        .current
        .as_deref()
        .map(|step| format!(": {step}"))
        .unwrap_or_default();
    let mut row = FooterRowV0::new(
        id.clone(),
        "plan",
        "plan",
        format!("plan {}/{}{current}", summary.completed, summary.total),
    )
    .with_progress(summary.completed as u64, summary.total as u64);
    if plan.expanded {
        row = row.with_detail(plan.steps.iter().map(crate::tools::step_line).collect());
    } else {
        row = row.with_action(FooterActionV0::command(
            "checklist",
            "Checklist",
            "plan",
            json!({"action": "open"}),
        ));
    }
    for action in summary.actions {
        row = row.with_action(FooterActionV0::command(
            "clear",
            &action.label,
            &action.command,
            action.input,
        ));
    }
    row
}
