//! The extension on shiitake-core: hooks, projection, prompt sections, tools, catalog.

use serde::Deserialize;
use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, FiredTimer, Grant, Grants, HookError, RunContext,
    Settled, StateScope, StateView, Tx,
};
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::{BoundError, ExtensionId};

use crate::contract::{
    EXTENSION_ID, GoalAction, GoalChange, GoalCommand, GoalId, NAMESPACE, STATE_VERSION, SetGoal,
};
use crate::state::{Book, RunSettled, parse_correlation};
use crate::store::{self, TimerPayload, TimerPurpose};
use crate::tools::{self, RunFacts};
use crate::{catalog, flow, migrate, text};

/// Goal: one objective per Session that keeps the agent working until it is achieved.
pub struct GoalExtension {
    definition: ExtensionDefinition,
}

/// Exactly what the host must grant the goal extension: its state, prompt sections,
/// projection, the `/goal` commands, recheck timers, continuations and chat lines
/// (admissions), the `goal.*` tools and its attention.
pub fn goal_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Prompt)
        .with(Grant::Projection)
        .with(Grant::Commands)
        .with(Grant::Timers)
        .with(Grant::Admissions)
        .with(Grant::Tools)
        .with(Grant::Attention)
}

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

impl GoalExtension {
    /// The extension, at state version [`STATE_VERSION`].
    pub fn new() -> Result<Self, BoundError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: extension_id()?,
                namespace: NAMESPACE.into(),
                scopes: vec![StateScope::Session],
                schema_version: STATE_VERSION,
                migrations: vec![migrate::DISCARD_PREVIEWS],
                configuration: json!({}),
            },
        })
    }
}

fn decode<T: for<'de> Deserialize<'de>>(command: &str, input: Value) -> Result<T, HookError> {
    serde_json::from_value(input).map_err(|error| HookError::Invalid(format!("{command}: {error}")))
}

fn answer(goal: Option<&crate::contract::Goal>) -> Result<Value, HookError> {
    serde_json::to_value(goal).map_err(|error| HookError::Failed(error.to_string()))
}

/// Runs one person's change and answers the goal as it stands afterwards.
fn person(
    tx: &mut Tx<'_>,
    change: impl FnOnce(&mut Book, u64) -> Result<Vec<crate::state::Effect>, crate::state::Refused>,
) -> Result<Value, HookError> {
    let goal = store::transact(tx, |book, now| {
        let effects = change(book, now)?;
        Ok((book.goal.clone(), effects))
    })?;
    answer(goal.as_ref())
}

fn new_goal_id() -> GoalId {
    GoalId::new(format!("goal_{}", ulid::Ulid::generate()))
}

/// One `/goal` action.
fn act(tx: &mut Tx<'_>, command: GoalCommand) -> Result<Value, HookError> {
    let seen = command.revision;
    match command.action {
        GoalAction::Set => {
            let objective = command
                .objective
                .ok_or_else(|| HookError::Invalid("/goal set needs an objective".into()))?;
            let goal_id = new_goal_id();
            person(tx, |book, now| book.set(goal_id, &objective, seen, now))
        }
        GoalAction::Pause => person(tx, |book, _now| book.pause(seen)),
        GoalAction::Resume => person(tx, |book, now| book.resume(seen, now)),
        GoalAction::Clear => person(tx, |book, now| book.clear(seen, now)),
    }
}

fn change(action: GoalAction, input: GoalChange) -> GoalCommand {
    GoalCommand {
        action,
        objective: None,
        revision: input.revision,
        request_id: input.request_id,
    }
}

impl Extension for GoalExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "get" => answer(store::load(tx)?.goal.as_ref()),
            "set" => {
                let set: SetGoal = decode(command, input)?;
                act(
                    tx,
                    GoalCommand {
                        action: GoalAction::Set,
                        objective: Some(set.objective),
                        revision: set.replace_revision,
                        request_id: set.request_id,
                    },
                )
            }
            "pause" => act(tx, change(GoalAction::Pause, decode(command, input)?)),
            "resume" => act(tx, change(GoalAction::Resume, decode(command, input)?)),
            "clear" => act(tx, change(GoalAction::Clear, decode(command, input)?)),
            "goal" => act(tx, decode(command, input)?),
            flow::GOAL_FLOW => Ok(json!(flow::goal_step(&store::load(tx)?, &input))),
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        let correlation = settled
            .origin
            .as_ref()
            .filter(|origin| origin.extension_id.as_str() == EXTENSION_ID)
            .map(|origin| origin.correlation.clone());
        let run = RunSettled {
            run: settled.command_id.as_str().to_owned(),
            outcome: settled.outcome,
            correlation,
            tool_calls: settled.tool_calls,
        };
        store::transact(tx, |book, now| Ok(((), book.settled(&run, now))))
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        // A timer whose payload this version does not know is stale: it does nothing.
        let Ok(payload) = serde_json::from_value::<TimerPayload>(timer.payload.clone()) else {
            return Ok(());
        };
        let timer_id = timer.id.as_str().to_owned();
        match payload.purpose {
            TimerPurpose::Recheck => store::transact(tx, |book, now| {
                Ok(((), book.recheck(&timer_id, &payload.goal_id, now)))
            }),
        }
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        serde_json::to_value(store::projection(&store::read(state))).ok()
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let book = store::read(&run.state);
        let mut sections = Vec::new();
        if let Some(goal) = book.active() {
            sections.extend(text::context(goal));
            let continues_it = run
                .origin
                .filter(|origin| origin.extension_id.as_str() == EXTENSION_ID)
                .and_then(|origin| parse_correlation(&origin.correlation))
                .is_some_and(|(goal_id, _)| book.live().is_some_and(|g| g.goal_id == goal_id));
            if continues_it {
                sections.push(text::directive());
            }
        }
        let facts = RunFacts::new(run.command_id.as_str().to_owned(), book.fence());
        Contribution {
            prompt_section: (!sections.is_empty()).then(|| sections.join("\n\n")),
            tools: tools::module(tools, facts),
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(catalog::catalog(self.definition.id.clone()))
    }
}
