//! The `/goal` conversation: which action, then the objective for `set`, then a
//! confirmation that carries the revision the person was shown.
//!
//! The client calls [`GOAL_FLOW`] with what it collected so far (`action`,
//! `objective`); the answer is the next [`FlowStep`]. Replacing a live or paused
//! goal is confirmed with its revision, so a newer goal set meanwhile is never
//! replaced: the `goal` command refuses a stale revision.

use serde_json::{Map, Value, json};
use shiitake_protocol::catalog::{ArgumentKind, FlowStep};

use crate::contract::{GoalAction, GoalCommand, GoalStatus, MAX_OBJECTIVE_BYTES, objective};
use crate::state::Book;

/// The flow command's name.
pub const GOAL_FLOW: &str = "goal_flow";

fn action_named(name: &str) -> Option<GoalAction> {
    serde_json::from_value(json!(name)).ok()
}

fn confirm(summary: String, command: GoalCommand) -> FlowStep {
    FlowStep::Confirm {
        summary,
        input: json!(command),
    }
}

/// The next step of `/goal` for the arguments collected so far.
pub fn goal_step(book: &Book, collected: &Value) -> FlowStep {
    let empty = Map::new();
    let collected = collected.as_object().unwrap_or(&empty);
    let active = book.active();
    let Some(name) = collected.get("action").and_then(Value::as_str) else {
        let mut choices = vec!["set"];
        match active.map(|goal| goal.status) {
            Some(GoalStatus::Live) => choices.extend(["pause", "clear"]),
            Some(GoalStatus::Paused) => choices.extend(["resume", "clear"]),
            _ => {}
        }
        return FlowStep::Ask {
            argument: "action".into(),
            prompt: match active {
                Some(goal) => format!("The goal is {}: {}", goal.status.name(), goal.objective),
                None => "Set a goal for this Session?".into(),
            },
            kind: ArgumentKind::one_of(choices),
        };
    };
    let Some(action) = action_named(name) else {
        return FlowStep::Unavailable {
            message: format!("/goal does not know {name:?}; use set, pause, resume or clear."),
        };
    };
    let command = |objective: Option<String>, revision: Option<u64>| GoalCommand {
        action,
        objective,
        revision,
        request_id: None,
    };
    match action {
        GoalAction::Set => {
            let raw = collected
                .get("objective")
                .and_then(Value::as_str)
                .filter(|raw| !raw.trim().is_empty());
            let Some(raw) = raw else {
                return FlowStep::Ask {
                    argument: "objective".into(),
                    prompt: "What should the agent work toward until it is done?".into(),
                    kind: ArgumentKind::text(MAX_OBJECTIVE_BYTES),
                };
            };
            let objective = match objective(raw) {
                Ok(objective) => objective,
                Err(error) => {
                    return FlowStep::Unavailable {
                        message: format!("That goal cannot be set: {error}."),
                    };
                }
            };
            match active {
                Some(goal) => confirm(
                    format!(
                        "Replace the {} goal \"{}\" with \"{objective}\"? The current goal is \
                         recorded as cleared.",
                        goal.status.name(),
                        goal.objective
                    ),
                    command(Some(objective), Some(goal.revision)),
                ),
                None => confirm(
                    format!("Set the goal \"{objective}\"?"),
                    command(Some(objective), None),
                ),
            }
        }
        GoalAction::Pause | GoalAction::Resume => {
            let (verb, from) = if action == GoalAction::Pause {
                ("Pause", GoalStatus::Live)
            } else {
                ("Resume", GoalStatus::Paused)
            };
            match active {
                Some(goal) if goal.status == from => confirm(
                    format!("{verb} the goal \"{}\"?", goal.objective),
                    command(None, Some(goal.revision)),
                ),
                _ => FlowStep::Unavailable {
                    message: format!("No goal is {}.", from.name()),
                },
            }
        }
        GoalAction::Clear => match active {
            Some(goal) => confirm(
                format!("Clear the goal \"{}\"?", goal.objective),
                command(None, Some(goal.revision)),
            ),
            None => FlowStep::Unavailable {
                message: "There is no goal to clear.".into(),
            },
        },
    }
}
