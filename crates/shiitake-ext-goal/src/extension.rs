//! The extension on core's kit: the contract's commands, the `/goal` flow step, the
//! four tools, the hooks, the projection with its footer row, the prompt sections and
//! the catalog.

use serde_json::json;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{Grant, HookError, RunContext, StateView, Tx};
use shiitake_protocol::{BoundError, CommandScope, ExtensionId};

use crate::contract::{
    ClearGoal, EXTENSION_ID, GetGoal, Goal, GoalAction, GoalChange, GoalCommand, GoalContract,
    GoalProjection, NAMESPACE, PauseGoal, ResumeGoal, STATE_VERSION, SetGoal, footer_row,
};
use crate::state::{GoalBounds, RunSettled, parse_correlation};
use crate::store::{self, TimerPayload, TimerPurpose};
use crate::tools::{self, GoalRun};
use crate::{catalog, flow, migrate, text};

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

/// Goal, declared to core's kit at state version [`STATE_VERSION`]: register it with
/// `AgentBuilder::kit_extension`, which grants exactly what it declares (state, prompt,
/// projection, the `/goal` commands, recheck timers, continuations and chat lines as
/// admissions, the `goal.*` tools and its attention). Its goals pause at the default
/// [`GoalBounds`].
pub fn extension() -> Result<KitExtension<GoalContract, GoalRun>, KitError> {
    extension_with(GoalBounds::default())
}

/// Goal as [`extension`] declares it, its goals pausing as `stalled` when their turns
/// since they went live reach the host's `bounds`.
pub fn extension_with(bounds: GoalBounds) -> Result<KitExtension<GoalContract, GoalRun>, KitError> {
    let mut kit = ExtensionKit::<GoalContract, GoalRun>::with_run_facts(NAMESPACE, GoalRun::of)?
        .session_state()
        .schema(STATE_VERSION, vec![migrate::DISCARD_PREVIEWS])
        .command(|tx, _: GetGoal| Ok(store::load(tx)?.goal))
        .command(|tx, set: SetGoal| {
            act(
                tx,
                GoalCommand {
                    action: GoalAction::Set,
                    objective: Some(set.objective),
                    revision: set.replace_revision,
                    request_id: set.request_id,
                },
            )
        })
        .command(|tx, PauseGoal(change)| act(tx, command(GoalAction::Pause, change)))
        .command(|tx, ResumeGoal(change)| act(tx, command(GoalAction::Resume, change)))
        .command(|tx, ClearGoal(change)| act(tx, command(GoalAction::Clear, change)))
        .command(act)
        .untyped_command(flow::GOAL_FLOW, CommandScope::Session, |tx, input| {
            Ok(json!(flow::goal_step(&store::load(tx)?, &input)))
        });
    for tool in tools::tools()? {
        kit = kit.tool(tool);
    }
    kit.tools_description("The Session's goal: one objective worked on until it is achieved.")
        .on_settled(move |tx, settled| {
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
                tokens: settled.tokens,
            };
            store::transact(tx, |book, now| {
                Ok(((), book.settled_within(&run, now, &bounds)))
            })
        })
        .on_timer(|tx, timer| {
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
        })
        // Continuations and chat lines are admissions; blocked, stalled and waiting
        // goals raise attention.
        .uses(Grant::Admissions)
        .uses(Grant::Attention)
        .prompt(prompt)
        .projection(|state| Some(projection(state)))
        .footer(|state, id| footer_row(&projection(state), id).into_iter().collect())
        .catalog(catalog::catalog)
        .build()
}

fn projection(state: &StateView<'_>) -> GoalProjection {
    store::projection(&store::read(state))
}

fn command(action: GoalAction, change: GoalChange) -> GoalCommand {
    GoalCommand {
        action,
        objective: None,
        revision: change.revision,
        request_id: change.request_id,
    }
}

/// One `/goal` action by a person; answers the goal as it stands afterwards.
fn act(tx: &mut Tx<'_>, command: GoalCommand) -> Result<Goal, HookError> {
    let seen = command.revision;
    let goal = match command.action {
        GoalAction::Set => {
            let objective = command
                .objective
                .ok_or_else(|| HookError::Invalid("/goal set needs an objective".into()))?;
            let goal_id = tools::new_goal_id();
            store::change(tx, |book, now| book.set(goal_id, &objective, seen, now))
        }
        GoalAction::Pause => store::change(tx, |book, _now| book.pause(seen)),
        GoalAction::Resume => store::change(tx, |book, now| book.resume(seen, now)),
        GoalAction::Clear => store::change(tx, |book, now| book.clear(seen, now)),
    }?;
    // Every accepted change leaves a goal row (a cleared goal stays, as cleared).
    goal.ok_or_else(|| HookError::Failed("the goal row is missing after a change".into()))
}

/// The quiet goal context of every run, and the continuation directive of the runs
/// Goal admitted for the live goal.
fn prompt(run: &RunContext<'_>) -> Option<String> {
    let book = store::read(&run.state);
    let goal = book.active()?;
    let mut sections: Vec<String> = text::context(goal).into_iter().collect();
    let continues_it = run
        .origin
        .filter(|origin| origin.extension_id.as_str() == EXTENSION_ID)
        .and_then(|origin| parse_correlation(&origin.correlation))
        .is_some_and(|(goal_id, _)| book.live().is_some_and(|g| g.goal_id == goal_id));
    if continues_it {
        sections.push(text::directive());
    }
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}
