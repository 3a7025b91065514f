//! The model tools `goal.create`, `goal.get`, `goal.complete` and `goal.block`,
//! offered in every run of the Session.
//!
//! Each run's tools are fenced by the goal revision the run saw when it started: a
//! tool that changes the goal is refused once someone else changed it (a person
//! paused, replaced or cleared it), and each successful change moves the run's
//! fence to the revision it wrote, so one run can create and then complete.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay, ToolError};
use shiitake_core::extension::HookError;
use shiitake_core::extension::host::ToolTx;

use crate::contract::{
    BlockInput, CompleteInput, CreateInput, Goal, GoalId, MAX_NOTE_BYTES, MAX_OBJECTIVE_BYTES,
    NAMESPACE,
};
use crate::state::{Book, Effect, Fence, Refused};
use crate::store;

/// What a run's goal tools know of the run.
#[derive(Clone, Debug)]
pub(crate) struct RunFacts {
    /// The run's command id.
    pub(crate) run: String,
    /// The goal revision the run saw, moved by its own successful changes.
    pub(crate) fence: Arc<Mutex<Fence>>,
}

impl RunFacts {
    pub(crate) fn new(run: String, fence: Fence) -> Self {
        Self {
            run,
            fence: Arc::new(Mutex::new(fence)),
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

fn decode<T: serde::de::DeserializeOwned>(input: Value, tool: &str) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|error| ToolError::for_model(format!("{tool}: {error}")))
}

fn encode(goal: Option<&Goal>, message: &str) -> Result<Value, HookError> {
    Ok(json!({"goal": goal, "message": message}))
}

/// Runs a goal change in the owner and moves the run's fence to what it wrote.
async fn change(
    tools: &ToolTx,
    facts: &RunFacts,
    message: &'static str,
    transition: impl FnOnce(&mut Book, Fence, u64) -> Result<Vec<Effect>, Refused> + Send + 'static,
) -> Result<Value, ToolError> {
    let seen = facts.seen();
    let answer = tools
        .run(move |tx| {
            let goal = store::transact(tx, |book, now| {
                let effects = transition(book, seen, now)?;
                Ok((book.goal.clone(), effects))
            })?;
            encode(goal.as_ref(), message)
        })
        .await?;
    let goal: Option<Goal> = serde_json::from_value(answer["goal"].clone())
        .map_err(|error| ToolError::fatal(format!("goal answer: {error}")))?;
    facts.saw(goal.as_ref());
    Ok(answer)
}

/// The `goal` module of one run.
pub(crate) fn module(tools: ToolTx, facts: RunFacts) -> Option<Module> {
    let op = |name: &str| OperationName::new(name).ok();
    let get = {
        let tools = tools.clone();
        let facts = facts.clone();
        Operation::from_fn(
            op("get")?,
            "The Session's goal (null before any), and whether it changed since this turn began.",
            move |_input, _ctx| {
                let tools = tools.clone();
                let seen = facts.seen();
                async move {
                    tools
                        .run(move |tx| {
                            let book = store::load(tx)?;
                            Ok(json!({
                                "goal": book.goal,
                                "changedSinceTurnBegan": book.fence() != seen,
                            }))
                        })
                        .await
                }
            },
        )
        .with_input_schema(json!({"type": "object", "additionalProperties": false}))
        .with_replay(Replay::Safe)
    };
    let create = {
        let tools = tools.clone();
        let facts = facts.clone();
        Operation::from_fn(
            op("create")?,
            "Set the Session's goal: an objective you keep working on, turn after turn, until \
             you complete it. Refused while a goal is live (only a person replaces one). On a \
             goal that paused on its own, the same objective resumes it and another replaces it.",
            move |input, _ctx| {
                let tools = tools.clone();
                let facts = facts.clone();
                async move {
                    let input: CreateInput = decode(input, "goal.create")?;
                    let goal_id = GoalId::new(format!("goal_{}", ulid::Ulid::generate()));
                    change(
                        &tools,
                        &facts,
                        "The goal is live; continuation turns follow once this turn ends.",
                        move |book, seen, now| book.create(seen, goal_id, &input.objective, now),
                    )
                    .await
                }
            },
        )
        .with_input_schema(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["objective"],
            "properties": {
                "objective": {"type": "string", "minLength": 1, "maxLength": MAX_OBJECTIVE_BYTES,
                              "description": "What to achieve (at most 2000 bytes of UTF-8)."}
            }
        }))
    };
    let complete = {
        let tools = tools.clone();
        let facts = facts.clone();
        Operation::from_fn(
            op("complete")?,
            "Mark the goal achieved. It takes effect when this turn ends successfully.",
            move |input, _ctx| {
                let tools = tools.clone();
                let facts = facts.clone();
                async move {
                    let input: CompleteInput = decode(input, "goal.complete")?;
                    let run = facts.run.clone();
                    change(
                        &tools,
                        &facts,
                        "Recorded: the goal is achieved when this turn ends successfully.",
                        move |book, seen, _now| book.complete(seen, &run, input.summary.as_deref()),
                    )
                    .await
                }
            },
        )
        .with_input_schema(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_BYTES,
                            "description": "What was achieved, in a sentence or two."}
            }
        }))
        // The same run asking again records the same provisional completion.
        .with_replay(Replay::Safe)
    };
    let block = Operation::from_fn(
        op("block")?,
        "Pause the goal because you cannot go on without a person; say what they must do or \
         decide. It takes effect when this turn ends successfully.",
        move |input, _ctx| {
            let tools = tools.clone();
            let facts = facts.clone();
            async move {
                let input: BlockInput = decode(input, "goal.block")?;
                let run = facts.run.clone();
                change(
                    &tools,
                    &facts,
                    "Recorded: the goal pauses as blocked when this turn ends successfully.",
                    move |book, seen, _now| book.block(seen, &run, &input.reason),
                )
                .await
            }
        },
    )
    .with_input_schema(json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["reason"],
        "properties": {
            "reason": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_BYTES}
        }
    }))
    .with_replay(Replay::Safe);
    let mut module = Module::new(
        ModulePath::new(NAMESPACE).ok()?,
        "The Session's goal: one objective worked on until it is achieved.",
    );
    for operation in [create, get, complete, block] {
        module.add_operation(operation).ok()?;
    }
    Some(module)
}
