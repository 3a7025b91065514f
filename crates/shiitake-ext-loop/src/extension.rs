//! The Loop extension on core's extension kit: the `/loop` command, timers, settled
//! runs, the projection and the footer row.

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{
    Due, FiredTimer, Grant, HookError, RunContext, Settled, StateScope, StateView, TimerId, Tx,
    cadence,
};
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0};
use shiitake_protocol::{ExtensionId, PromptDelivery, TerminalOutcome};

use crate::contract::{
    EXTENSION_ID, LoopAction, LoopCommand, LoopContract, LoopMode, LoopProjection, LoopRecord,
    LoopStatus, NAMESPACE, StoppedBy,
};
use crate::state::{self, CURRENT, Effect, LoopError, Settlement, TIMERS};

/// What a run's tools know of it: the loop occurrence it runs (loop id, occurrence),
/// when a loop admitted it; `loop.schedule_next` is accepted only there.
pub type OwnRun = Option<(String, u64)>;

/// The Loop extension: `/loop`, the `loop.*` tools, its timers and settled hook, the
/// projection, the footer row and the catalog, declared to core's kit. Register it
/// with `AgentBuilder::kit_extension`; its grants are what it declares.
pub fn extension() -> Result<KitExtension<LoopContract, OwnRun>, KitError> {
    let mut kit = ExtensionKit::<LoopContract, OwnRun>::with_run_facts(NAMESPACE, own_run)?
        .session_state()
        // Occurrences are prompts it admits into its own Session.
        .uses(Grant::Admissions)
        .command(loop_command);
    for tool in crate::tools::tools()? {
        kit = kit.tool(tool);
    }
    kit.tools_description("The Session's loop.")
        .on_timer(on_timer)
        .on_settled(on_settled)
        .projection(|state| {
            Some(LoopProjection {
                current: recorded(state),
            })
        })
        .footer(|state, id| {
            recorded(state)
                .and_then(|r| footer_row(&r, id))
                .into_iter()
                .collect()
        })
        .catalog(crate::catalog::catalog)
        .build()
}

/// The occurrence this run is, read from the origin a loop admitted it with.
fn own_run(run: &RunContext<'_>) -> OwnRun {
    run.origin
        .filter(|o| o.extension_id.as_str() == EXTENSION_ID)
        .and_then(|o| state::parse_correlation(&o.correlation))
        .map(|(id, n)| (id.to_owned(), n))
}

/// The timers of the Session's loop.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoopTimers {
    occurrence: Option<TimerId>,
    expiry: Option<TimerId>,
}

/// What a loop timer is for; stored as its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Purpose {
    Occurrence,
    Expiry,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimerPayload {
    loop_id: String,
    purpose: Purpose,
}

pub(crate) fn invalid(error: LoopError) -> HookError {
    HookError::Invalid(error.to_string())
}

fn recorded(state: &StateView<'_>) -> Option<LoopRecord> {
    state.get(StateScope::Session, CURRENT.0, CURRENT.1)
}

pub(crate) fn current(tx: &Tx<'_>) -> Result<Option<LoopRecord>, HookError> {
    tx.get(StateScope::Session, CURRENT.0, CURRENT.1)
}

/// Clears the timer in `slot`, if one is set.
fn disarm(tx: &mut Tx<'_>, slot: &mut Option<TimerId>) -> Result<(), HookError> {
    match slot.take() {
        Some(old) => tx.clear_timer(&old),
        None => Ok(()),
    }
}

/// Writes a step: the record, then its effects through the transaction.
pub(crate) fn apply(tx: &mut Tx<'_>, step: state::Step) -> Result<LoopRecord, HookError> {
    let (mut record, effects) = step;
    let mut timers: LoopTimers = tx
        .get(StateScope::Session, TIMERS.0, TIMERS.1)?
        .unwrap_or_default();
    let loop_id = record.id.clone();
    let payload = |purpose| {
        serde_json::to_value(TimerPayload {
            loop_id: loop_id.clone(),
            purpose,
        })
        .map_err(|error| HookError::Failed(error.to_string()))
    };
    for effect in effects {
        match effect {
            Effect::Admit(n) => {
                tx.admit(
                    &record.prompt,
                    PromptDelivery::FollowUp,
                    state::correlation(&record.id, n),
                )?;
            }
            Effect::ArmCadence(expression) => {
                disarm(tx, &mut timers.occurrence)?;
                record.next_due = Some(cadence::next_after(&expression, tx.now())?);
                let id = tx.set_timer(Due::Cron(expression), payload(Purpose::Occurrence)?)?;
                timers.occurrence = Some(id);
            }
            Effect::ArmNext(at) => {
                disarm(tx, &mut timers.occurrence)?;
                let id = tx.set_timer(Due::At(at), payload(Purpose::Occurrence)?)?;
                timers.occurrence = Some(id);
            }
            Effect::ArmExpiry(at) => {
                disarm(tx, &mut timers.expiry)?;
                timers.expiry = Some(tx.set_timer(Due::At(at), payload(Purpose::Expiry)?)?);
            }
            Effect::DisarmOccurrence => disarm(tx, &mut timers.occurrence)?,
            Effect::DisarmAll => {
                disarm(tx, &mut timers.occurrence)?;
                disarm(tx, &mut timers.expiry)?;
            }
        }
    }
    tx.put(StateScope::Session, CURRENT.0, CURRENT.1, &record)?;
    tx.put(StateScope::Session, TIMERS.0, TIMERS.1, &timers)?;
    Ok(record)
}

/// Starts a loop (a person's `/loop start` or the model's `loop.start`).
pub(crate) fn start(
    tx: &mut Tx<'_>,
    prompt: String,
    cadence_text: Option<String>,
) -> Result<LoopRecord, HookError> {
    let mode = match cadence_text {
        Some(expression) => {
            // A too long cadence is refused by the state machine with its own error.
            if expression.len() <= crate::contract::MAX_CADENCE_BYTES {
                cadence::validate(&expression)?;
            }
            LoopMode::Cron {
                cadence: expression,
            }
        }
        None => LoopMode::SelfPaced,
    };
    let existing = current(tx)?;
    let id = ulid::Ulid::generate().to_string();
    let step = state::start(existing.as_ref(), id, prompt, mode, tx.now()).map_err(invalid)?;
    apply(tx, step)
}

/// Stops the loop (a person or the model).
pub(crate) fn stop(tx: &mut Tx<'_>, by: StoppedBy) -> Result<LoopRecord, HookError> {
    let existing = current(tx)?;
    let step = state::stop(existing.as_ref(), by).map_err(invalid)?;
    apply(tx, step)
}

/// `/loop <start|pause|resume|stop>`, also the footer row's buttons; answers the
/// loop as it stands afterwards.
fn loop_command(tx: &mut Tx<'_>, input: LoopCommand) -> Result<LoopProjection, HookError> {
    let record = match input.action {
        LoopAction::Start => {
            let prompt = input
                .prompt
                .ok_or_else(|| HookError::Invalid("/loop start needs a prompt".into()))?;
            start(tx, prompt, input.cadence)?
        }
        LoopAction::Pause => {
            let existing = current(tx)?;
            apply(tx, state::pause(existing.as_ref()).map_err(invalid)?)?
        }
        LoopAction::Resume => {
            let existing = current(tx)?;
            let now = tx.now();
            apply(tx, state::resume(existing.as_ref(), now).map_err(invalid)?)?
        }
        LoopAction::Stop => stop(tx, StoppedBy::Person)?,
    };
    Ok(LoopProjection {
        current: Some(record),
    })
}

/// A loop timer came due: an occurrence (cron or self-paced next) or the expiry.
fn on_timer(tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
    let Ok(payload) = serde_json::from_value::<TimerPayload>(timer.payload.clone()) else {
        return Ok(());
    };
    let Some(record) = current(tx)? else {
        return Ok(());
    };
    if record.id != payload.loop_id {
        // A timer of an earlier loop: nothing to do.
        return Ok(());
    }
    let step = match payload.purpose {
        Purpose::Expiry => state::expiry_due(&record, tx.now()),
        Purpose::Occurrence => {
            let next_due = match &record.mode {
                LoopMode::Cron {
                    cadence: expression,
                } => Some(cadence::next_after(expression, timer.due_at.max(tx.now()))?),
                LoopMode::SelfPaced => None,
            };
            state::occurrence_due(&record, timer.due_at, next_due)
        }
    };
    if step.1.is_empty() && step.0 == record {
        return Ok(());
    }
    apply(tx, step).map(drop)
}

/// A run settled: when it was this loop's occurrence in flight, the loop moves on.
fn on_settled(tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
    let Some(origin) = &settled.origin else {
        return Ok(());
    };
    if origin.extension_id.as_str() != EXTENSION_ID {
        return Ok(());
    }
    let Some((id, n)) = state::parse_correlation(&origin.correlation) else {
        return Ok(());
    };
    let Some(record) = current(tx)? else {
        return Ok(());
    };
    if record.id != id {
        return Ok(());
    }
    let settlement = match settled.outcome {
        TerminalOutcome::Cancelled => Settlement::Cancelled,
        _ => Settlement::Ended,
    };
    let now = tx.now();
    apply(tx, state::settled(&record, n, settlement, now)).map(drop)
}

/// The live loop's footer row, as the terminal has always printed it: `loop active, 3
/// run(s): <prompt>` or `loop paused (/loop resume), ...`; none for an ended loop.
/// Its buttons pause or resume and stop it through `/loop`.
fn footer_row(record: &LoopRecord, id: &ExtensionId) -> Option<FooterRowV0> {
    let (status, toggle) = match record.status {
        LoopStatus::Active => ("active", ("pause", "Pause")),
        LoopStatus::Paused => ("paused (/loop resume)", ("resume", "Resume")),
        LoopStatus::Ended => return None,
    };
    let text = format!(
        "loop {status}, {} run(s): {}",
        record.occurrences, record.prompt
    );
    let button = |(name, label): (&str, &str)| {
        FooterActionV0::command(name, label, "loop", json!({ "action": name }))
    };
    Some(
        FooterRowV0::new(id.clone(), "loop", "loop", text)
            .with_action(button(toggle))
            .with_action(button(("stop", "Stop"))),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::contract::LoopMode;

    fn record(status: LoopStatus) -> LoopRecord {
        LoopRecord {
            id: "L".into(),
            prompt: "Check the build".into(),
            mode: LoopMode::SelfPaced,
            status,
            started_at: 0,
            expires_at: None,
            occurrences: 3,
            in_flight: None,
            skipped: 0,
            next_due: None,
            next_requested_ms: None,
            end: None,
        }
    }

    #[test]
    fn the_footer_row_prints_todays_line_and_offers_its_buttons() {
        let id = ExtensionId::new(EXTENSION_ID).unwrap();
        let active = footer_row(&record(LoopStatus::Active), &id).unwrap();
        assert_eq!(
            (
                active.key.as_str(),
                active.kind.as_str(),
                active.text.as_str()
            ),
            ("loop", "loop", "loop active, 3 run(s): Check the build")
        );
        let names: Vec<_> = active.actions.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["pause", "stop"]);
        let paused = footer_row(&record(LoopStatus::Paused), &id).unwrap();
        assert_eq!(
            paused.text,
            "loop paused (/loop resume), 3 run(s): Check the build"
        );
        let names: Vec<_> = paused.actions.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["resume", "stop"]);
        assert_eq!(
            serde_json::to_value(&paused.actions[0]).unwrap(),
            json!({"label": "Resume", "name": "resume", "kind": "command",
                   "command": "loop", "input": {"action": "resume"}})
        );
        assert!(footer_row(&record(LoopStatus::Ended), &id).is_none());
    }
}
