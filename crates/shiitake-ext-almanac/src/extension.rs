//! The Almanac extension on core's extension API.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_core::extension::{
    AdmissionOutcome, Admitted, Due, Extension, ExtensionDefinition, FiredTimer, Grant, Grants,
    HookError, StateScope, StateView, TimerId, Tx, cadence,
};
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
};
use shiitake_protocol::{ExtensionId, PromptDelivery, RequestId, SessionId};

use crate::contract::{
    AlmanacProjection, CreateSchedule, EXTENSION_ID, MAX_CADENCE_BYTES, MAX_PROMPT_BYTES,
    NAMESPACE, RecordedError, Schedule, ScheduleId, ScheduleRef, ScheduleWhen,
};
use crate::state::{self, AlmanacError, Effect, SCHEDULES, TIMERS};

/// The Almanac extension; add it with [`almanac_grants`].
pub struct AlmanacExtension {
    definition: ExtensionDefinition,
}

impl AlmanacExtension {
    /// The extension with its definition.
    pub fn new() -> Result<Self, HookError> {
        let id = ExtensionId::new(EXTENSION_ID)
            .map_err(|error| HookError::Invalid(error.to_string()))?;
        Ok(Self {
            definition: ExtensionDefinition {
                id,
                namespace: NAMESPACE.into(),
                scopes: vec![StateScope::Agent],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
        })
    }
}

/// Exactly what the host grants Almanac: Agent state, the commands, timers,
/// admissions, and the projection that shows a Session its schedules.
pub fn almanac_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Commands)
        .with(Grant::Timers)
        .with(Grant::Admissions)
        .with(Grant::Projection)
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

fn encode<T: Serialize>(value: &T) -> Result<Value, HookError> {
    serde_json::to_value(value).map_err(|error| HookError::Failed(error.to_string()))
}

fn decode<T: serde::de::DeserializeOwned>(input: Value, command: &str) -> Result<T, HookError> {
    serde_json::from_value(input).map_err(|error| HookError::Invalid(format!("{command}: {error}")))
}

fn create(tx: &mut Tx<'_>, input: CreateSchedule) -> Result<Schedule, HookError> {
    SessionId::new(input.session_id.as_str())
        .map_err(|error| HookError::Invalid(format!("sessionId: {error}")))?;
    let now = tx.now();
    let (when, first_due) = match (input.at, input.cadence) {
        (Some(at), None) => (ScheduleWhen::Once { at }, at),
        (None, Some(expression)) => {
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

impl Extension for AlmanacExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `create`, `list`, `pause`, `resume`, `delete` (Agent scope).
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "create" => encode(&create(tx, decode(input, command)?)?),
            "list" => {
                let schedules: Vec<Schedule> = tx
                    .scan(StateScope::Agent, SCHEDULES)?
                    .into_iter()
                    .map(|(_, schedule)| schedule)
                    .collect();
                encode(&schedules)
            }
            "pause" => {
                let input: ScheduleRef = decode(input, command)?;
                let schedule = load(tx, &input.schedule_id)?;
                encode(&apply(tx, state::pause(&schedule).map_err(invalid)?)?)
            }
            "resume" => {
                let input: ScheduleRef = decode(input, command)?;
                let schedule = load(tx, &input.schedule_id)?;
                let now = tx.now();
                let next_due = match &schedule.when {
                    ScheduleWhen::Cron {
                        cadence: expression,
                    } => Some(cadence::next_after(expression, now)?),
                    ScheduleWhen::Once { .. } => None,
                };
                let step = state::resume(&schedule, now, next_due).map_err(invalid)?;
                encode(&apply(tx, step)?)
            }
            "delete" => {
                let input: ScheduleRef = decode(input, command)?;
                let key = input.schedule_id.0;
                let existed = tx
                    .get::<Value>(StateScope::Agent, SCHEDULES, &key)?
                    .is_some();
                disarm(tx, &key)?;
                tx.delete(StateScope::Agent, SCHEDULES, &key)?;
                Ok(json!(existed))
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    /// A schedule's timer: admit the occurrence (due or retried).
    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
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
        apply(tx, state::due(&schedule, payload.occurrence)).map(|_| ())
    }

    /// The door answered an occurrence: record it and arm the next, or retry.
    fn on_admission(&self, tx: &mut Tx<'_>, admitted: &Admitted) -> Result<(), HookError> {
        let Some((id, occurrence)) = state::parse_occurrence_key(admitted.request_id.as_str())
        else {
            return Ok(());
        };
        let Some(schedule) = tx.get::<Schedule>(StateScope::Agent, SCHEDULES, &id.0)? else {
            // Deleted meanwhile: nothing to record.
            return Ok(());
        };
        let now = tx.now();
        let step = match &admitted.outcome {
            AdmissionOutcome::Accepted(command_id) => {
                let next_due = match &schedule.when {
                    ScheduleWhen::Cron {
                        cadence: expression,
                    } => Some(cadence::next_after(expression, occurrence.max(now))?),
                    ScheduleWhen::Once { .. } => None,
                };
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
        apply(tx, step).map(|_| ())
    }

    /// The schedules that admit into this Session.
    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let session = state.session_id().map(|s| s.as_str().to_owned());
        let schedules = state
            .scan::<Schedule>(StateScope::Agent, SCHEDULES)
            .into_iter()
            .map(|(_, schedule)| schedule)
            .filter(|schedule| Some(&schedule.session_id) == session.as_ref())
            .collect();
        serde_json::to_value(AlmanacProjection { schedules }).ok()
    }

    fn catalog(&self) -> Option<Catalog> {
        let argument = |name: &str, description: &str, kind, required| CatalogArgument {
            name: name.into(),
            description: description.into(),
            kind,
            required,
        };
        let text = |max: usize| ArgumentKind::Text {
            max_bytes: u32::try_from(max).unwrap_or(u32::MAX),
        };
        let command = |name: &str, summary: &str, arguments| CatalogCommand {
            name: name.into(),
            summary: summary.into(),
            scope: CatalogScope::Agent,
            call: name.trim_start_matches("almanac-").into(),
            arguments,
            steps: Vec::new(),
            flow: None,
        };
        let by_id = || vec![argument("scheduleId", "The schedule", text(64), true)];
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: self.definition.id.clone(),
            commands: vec![
                command(
                    "almanac-create",
                    "Schedule a prompt into a Session, once or on a cron cadence (UTC)",
                    vec![
                        argument("sessionId", "The target Session", text(64), true),
                        argument("prompt", "The prompt", text(MAX_PROMPT_BYTES), true),
                        argument(
                            "at",
                            "Once, at these Unix milliseconds",
                            ArgumentKind::Integer,
                            false,
                        ),
                        argument(
                            "cadence",
                            "A Unix cron cadence in UTC",
                            text(MAX_CADENCE_BYTES),
                            false,
                        ),
                    ],
                ),
                command("almanac-list", "List the schedules", Vec::new()),
                command("almanac-pause", "Pause a schedule", by_id()),
                command(
                    "almanac-resume",
                    "Resume a paused or stopped schedule",
                    by_id(),
                ),
                command("almanac-delete", "Delete a schedule", by_id()),
            ],
        })
    }
}
