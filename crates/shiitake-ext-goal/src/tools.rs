//! The model tools `goal.create`, `goal.get`, `goal.complete` and `goal.block`,
//! offered in every run of the Session, each in one owner transaction.
//!
//! Each run's tools are fenced by the goal revision the run saw when it started: a
//! tool that changes the goal is refused once someone else changed it (a person
//! paused, replaced or cleared it), and each successful change moves the run's
//! fence to the revision it wrote, so one run can create and then complete.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use shiitake_capabilities::Replay;
use shiitake_core::extension::kit::{KitError, Tool, ToolCall};
use shiitake_core::extension::{HookError, RunContext, Tx};

use crate::contract::{BlockInput, CompleteInput, CreateInput, GetInput, Goal, GoalId};
use crate::state::{Book, Effect, Fence, Refused};
use crate::store;

/// What the goal tools know of the run they serve: its id, and the goal revision it
/// saw, moved by its own successful changes (shared by the run's tools).
#[derive(Clone, Debug)]
pub struct GoalRun {
    run: String,
    fence: Arc<Mutex<Fence>>,
}

impl GoalRun {
    /// The facts of `run`, fenced at the goal revision committed when it started.
    pub(crate) fn of(run: &RunContext<'_>) -> Self {
        Self {
            run: run.command_id.as_str().to_owned(),
            fence: Arc::new(Mutex::new(store::read(&run.state).fence())),
        }
    }

    fn seen(&self) -> Fence {
        *self.fence.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn saw(&self, goal: Option<&Goal>) {
        *self.fence.lock().unwrap_or_else(PoisonError::into_inner) =
            Fence(goal.map(|goal| goal.revision));
    }
}

/// A fresh goal id: `goal_` and a ULID.
pub(crate) fn new_goal_id() -> GoalId {
    GoalId::new(format!("goal_{}", ulid::Ulid::generate()))
}

/// Runs a goal change fenced by what the run saw, and moves the fence to what it
/// wrote. The fence moves before the commit: a commit that then fails fails the tool,
/// and the run's next change is refused as stale rather than acting on a guess.
fn change(
    tx: &mut Tx<'_>,
    run: &GoalRun,
    message: &str,
    transition: impl FnOnce(&mut Book, Fence, u64) -> Result<Vec<Effect>, Refused>,
) -> Result<Value, HookError> {
    let seen = run.seen();
    let goal = store::change(tx, |book, now| transition(book, seen, now))?;
    run.saw(goal.as_ref());
    Ok(json!({"goal": goal, "message": message}))
}

/// The four tools, in the order the model sees them.
pub(crate) fn tools() -> Result<[Tool<GoalRun>; 4], KitError> {
    let create = Tool::new(
        "create",
        "Set the Session's goal: an objective you keep working on, turn after turn, until \
         you complete it. Refused while a goal is live (only a person replaces one). On a \
         goal that paused on its own, the same objective resumes it and another replaces it.",
        |tx, input: CreateInput, call: &ToolCall<GoalRun>| {
            change(
                tx,
                &call.run,
                "The goal is live; continuation turns follow once this turn ends.",
                |book, seen, now| book.create(seen, new_goal_id(), &input.objective, now),
            )
        },
    )?;
    let get = Tool::new(
        "get",
        "The Session's goal (null before any), and whether it changed since this turn began.",
        |tx, _: GetInput, call: &ToolCall<GoalRun>| {
            let book = store::load(tx)?;
            Ok(json!({
                "goal": book.goal,
                "changedSinceTurnBegan": book.fence() != call.run.seen(),
            }))
        },
    )?
    .replay(Replay::Safe);
    let complete = Tool::new(
        "complete",
        "Mark the goal achieved. It takes effect when this turn ends successfully.",
        |tx, input: CompleteInput, call: &ToolCall<GoalRun>| {
            change(
                tx,
                &call.run,
                "Recorded: the goal is achieved when this turn ends successfully.",
                |book, seen, _now| book.complete(seen, &call.run.run, input.summary.as_deref()),
            )
        },
    )?
    // The same run asking again records the same provisional completion.
    .replay(Replay::Safe);
    let block = Tool::new(
        "block",
        "Pause the goal because you cannot go on without a person; say what they must do or \
         decide. It takes effect when this turn ends successfully.",
        |tx, input: BlockInput, call: &ToolCall<GoalRun>| {
            change(
                tx,
                &call.run,
                "Recorded: the goal pauses as blocked when this turn ends successfully.",
                |book, seen, _now| book.block(seen, &call.run.run, &input.reason),
            )
        },
    )?
    .replay(Replay::Safe);
    Ok([create, get, complete, block])
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{MAX_NOTE_BYTES, MAX_OBJECTIVE_BYTES};

    /// One field's schema without its description: its type and bounds.
    fn bounds(schema: &Value, field: &str) -> Value {
        let mut field = schema["properties"][field].clone();
        if let Some(field) = field.as_object_mut() {
            field.remove("description");
        }
        field
    }

    #[test]
    fn the_derived_schemas_carry_the_bounds_and_refuse_unknown_fields() {
        let extension = crate::extension().expect("the goal extension builds");
        let schemas: Vec<(&str, &Value)> = extension.tool_schemas().collect();
        let names: Vec<&str> = schemas.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["create", "get", "complete", "block"]);
        for (name, schema) in &schemas {
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
        }
        let [create, get, complete, block] = [0, 1, 2, 3].map(|i| schemas[i].1);
        // The hand-written schemas these replace, field by field.
        let text = |max: usize| json!({"type": "string", "minLength": 1, "maxLength": max});
        assert_eq!(bounds(create, "objective"), text(MAX_OBJECTIVE_BYTES));
        assert_eq!(create["required"], json!(["objective"]));
        assert!(get.get("properties").is_none_or(|p| p == &json!({})));
        assert!(get.get("required").is_none());
        assert_eq!(bounds(complete, "summary"), text(MAX_NOTE_BYTES));
        assert!(
            complete.get("required").is_none(),
            "the summary is optional"
        );
        assert_eq!(bounds(block, "reason"), text(MAX_NOTE_BYTES));
        assert_eq!(block["required"], json!(["reason"]));
    }
}
