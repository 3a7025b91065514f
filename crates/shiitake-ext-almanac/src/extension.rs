//! The Almanac extension on core's extension kit: its Agent-scope commands, timers,
//! admissions, the projection and the catalog.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{
    AdmissionOutcome, Admitted, Due, FiredTimer, HookError, StateScope, StateView, TimerId, Tx,
    cadence,
};
use shiitake_protocol::{PromptDelivery, RequestId, SessionId};

use crate::contract::{
    AlmanacContract, AlmanacProjection, CreateSchedule, DeleteSchedule, ListSchedules,
    MAX_CADENCE_BYTES, NAMESPACE, PauseSchedule, RecordedError, ResumeSchedule, Schedule,
    ScheduleId, ScheduleWhen,
};
use crate::state::{self, AlmanacError, Effect, SCHEDULES, TIMERS};

/// The Almanac extension: `create`, `list`, `pause`, `resume` and `delete` (Agent
/// scope, refused on a Session's route), its timers and admissions, the projection
/// and the catalog, declared to core's kit. Register it with
/// `AgentBuilder::kit_extension`; its grants are what it declares.
pub fn extension() -> Result<KitExtension<AlmanacContract>, KitError> {
    ExtensionKit::<AlmanacContract>::new(NAMESPACE)?
        .agent_state()
        .command(create)
        .command(|tx, _: ListSchedules| all(tx))
        .command(|tx, PauseSchedule(input)| {
            let schedule = load(tx, &input.schedule_id)?;
            apply(tx, state::pause(&schedule).map_err(invalid)?)
        })
        .command(|tx, ResumeSchedule(input)| resume(tx, &input.schedule_id))
        .command(|tx, DeleteSchedule(input)| delete(tx, &input.schedule_id.0))
        .on_timer(on_timer)
        .on_admission(on_admission)
        .projection(|state| Some(projection(state)))
        .catalog(crate::catalog::catalog)
        .build()
}

/// What a schedule's timer carries.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimerPayload {
    schedule_id: ScheduleId,
    occurrence: u64,
}

fn invalid(error: AlmanacError) -> HookError {
    HookError::Invalid(error.to_string())
}

fn load(tx: &Tx<'_>, id: &ScheduleId) -> Result<Schedule, HookError> {
    tx.get(StateScope::Agent, SCHEDULES, &id.0)?
        .ok_or_else(|| invalid(AlmanacError::NotFound(id.0.clone())))
}

fn all(tx: &Tx<'_>) -> Result<Vec<Schedule>, HookError> {
    Ok(tx
        .scan(StateScope::Agent, SCHEDULES)?
        .into_iter()
        .map(|(_, schedule)| schedule)
        .collect())
}

/// The cadence's next time after `after`, for a recurring schedule.
fn next_cron(when: &ScheduleWhen, after: u64) -> Result<Option<u64>, HookError> {
    match when {
        ScheduleWhen::Cron { cadence } => Ok(Some(cadence::next_after(cadence, after)?)),
        ScheduleWhen::Once { .. } => Ok(None),
    }
}

/// Writes a step: the schedule, then its effects.
fn apply(tx: &mut Tx<'_>, step: state::Step) -> Result<Schedule, HookError> {
    let (schedule, effects) = step;
    let key = schedule.id.0.clone();
    for effect in effects {
        match effect {
            Effect::Arm { occurrence, at } => {
                disarm(tx, &key)?;
                let payload = serde_json::to_value(TimerPayload {
                    schedule_id: schedule.id.clone(),
                    occurrence,
                })
                .map_err(|error| HookError::Failed(error.to_string()))?;
                let timer = tx.set_timer(Due::At(at), payload)?;
                tx.put(StateScope::Agent, TIMERS, &key, &timer)?;
            }
            Effect::Disarm => disarm(tx, &key)?,
            Effect::Admit(occurrence) => {
                let occurrence_key = state::occurrence_key(&schedule.id, occurrence);
                let session = SessionId::new(schedule.session_id.as_str())
                    .map_err(|error| HookError::Invalid(error.to_string()))?;
                let request = RequestId::new(occurrence_key.as_str())
                    .map_err(|error| HookError::Invalid(error.to_string()))?;
                tx.admit_into(
                    &session,
                    request,
                    &schedule.prompt,
                    PromptDelivery::FollowUp,
                    occurrence_key,
                )?;
            }
        }
    }
    tx.put(StateScope::Agent, SCHEDULES, &key, &schedule)?;
    Ok(schedule)
}

fn disarm(tx: &mut Tx<'_>, key: &str) -> Result<(), HookError> {
    if let Some(timer) = tx.get::<TimerId>(StateScope::Agent, TIMERS, key)? {
        tx.clear_timer(&timer)?;
        tx.delete(StateScope::Agent, TIMERS, key)?;
    }
    Ok(())
}

/// `create`: checks the target and the due time, then arms the first occurrence. The
/// target Session must exist: the host answers `not_found` and commits nothing otherwise.
fn create(tx: &mut Tx<'_>, input: CreateSchedule) -> Result<Schedule, HookError> {
    let session = SessionId::new(input.session_id.as_str())
        .map_err(|error| HookError::Invalid(format!("sessionId: {error}")))?;
    tx.require_session(&session)?;
    let now = tx.now();
    let (when, first_due) = match (input.at, input.cadence) {
        (Some(at), None) => (ScheduleWhen::Once { at }, at),
        (None, Some(expression)) => {
            // A too long cadence is refused by the state machine with its own error.
            let first = if expression.len() <= MAX_CADENCE_BYTES {
                cadence::next_after(&expression, now)?
            } else {
                now
            };
            (
                ScheduleWhen::Cron {
                    cadence: expression,
                },
                first,
            )
        }
        _ => return Err(invalid(AlmanacError::BadWhen)),
    };
    let existing = tx.scan::<Value>(StateScope::Agent, SCHEDULES)?.len();
    let id = ScheduleId(ulid::Ulid::generate().to_string());
    let step = state::create(
        existing,
        id,
        input.session_id,
        input.prompt,
        when,
        first_due,
        now,
    )
    .map_err(invalid)?;
    apply(tx, step)
}

/// `resume`: a paused or stopped schedule comes back, at once for a pending occurrence.
fn resume(tx: &mut Tx<'_>, id: &ScheduleId) -> Result<Schedule, HookError> {
    let schedule = load(tx, id)?;
    let now = tx.now();
    let next_due = next_cron(&schedule.when, now)?;
    let step = state::resume(&schedule, now, next_due).map_err(invalid)?;
    apply(tx, step)
}

/// `delete`: answers whether the schedule existed; its timer goes with it.
fn delete(tx: &mut Tx<'_>, key: &str) -> Result<bool, HookError> {
    let existed = tx
        .get::<Value>(StateScope::Agent, SCHEDULES, key)?
        .is_some();
    disarm(tx, key)?;
    tx.delete(StateScope::Agent, SCHEDULES, key)?;
    Ok(existed)
}

/// A schedule's timer: admit the occurrence (due or retried).
fn on_timer(tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
    let Ok(payload) = serde_json::from_value::<TimerPayload>(timer.payload.clone()) else {
        return Ok(());
    };
    let key = payload.schedule_id.0.clone();
    let Some(schedule) = tx.get::<Schedule>(StateScope::Agent, SCHEDULES, &key)? else {
        return Ok(());
    };
    // This firing consumed the timer (its claim deletes it).
    if tx.get::<TimerId>(StateScope::Agent, TIMERS, &key)?.as_ref() == Some(&timer.id) {
        tx.delete(StateScope::Agent, TIMERS, &key)?;
    }
    apply(tx, state::due(&schedule, payload.occurrence)).map(drop)
}

/// The door answered an occurrence: record it and arm the next, or retry.
fn on_admission(tx: &mut Tx<'_>, admitted: &Admitted) -> Result<(), HookError> {
    let Some((id, occurrence)) = state::parse_occurrence_key(admitted.request_id.as_str()) else {
        return Ok(());
    };
    let Some(schedule) = tx.get::<Schedule>(StateScope::Agent, SCHEDULES, &id.0)? else {
        // Deleted meanwhile: nothing to record.
        return Ok(());
    };
    let now = tx.now();
    let step = match &admitted.outcome {
        AdmissionOutcome::Accepted(command_id) => {
            // Occurrences missed while the Agent was down fire once: the next is after now.
            let next_due = next_cron(&schedule.when, occurrence.max(now))?;
            state::accepted(
                &schedule,
                occurrence,
                command_id.as_str().to_owned(),
                next_due,
            )
        }
        AdmissionOutcome::Refused(error) => {
            let recorded = RecordedError {
                code: error.code.as_str().to_owned(),
                message: error.message.clone(),
                at: now,
            };
            state::refused(&schedule, occurrence, recorded, now)
        }
    };
    apply(tx, step).map(drop)
}

/// The schedules that admit into the Session being read.
fn projection(state: &StateView<'_>) -> AlmanacProjection {
    let session = state.session_id().map(|s| s.as_str().to_owned());
    let schedules = state
        .scan::<Schedule>(StateScope::Agent, SCHEDULES)
        .into_iter()
        .map(|(_, schedule)| schedule)
        .filter(|schedule| Some(&schedule.session_id) == session.as_ref())
        .collect();
    AlmanacProjection { schedules }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shiitake_core::extension::Grant;
    use shiitake_protocol::CommandScope;

    #[test]
    fn every_command_is_agent_scope_and_the_grants_are_the_old_ones() {
        let extension = crate::extension().unwrap();
        let commands: Vec<_> = extension.commands().collect();
        assert_eq!(
            commands,
            ["create", "delete", "list", "pause", "resume"].map(|name| (name, CommandScope::Agent))
        );
        let grants = extension.grants();
        for grant in [
            Grant::State,
            Grant::Commands,
            Grant::Timers,
            Grant::Admissions,
            Grant::Projection,
        ] {
            assert!(grants.has(grant), "{grant:?}");
        }
        assert!(!grants.has(Grant::Tools) && !grants.has(Grant::Prompt));
    }
}
