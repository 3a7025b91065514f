//! The Loop extension on core's extension API: commands, timers, settled runs.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Due, Extension, ExtensionDefinition, FiredTimer, Grant, Grants, HookError,
    RunContext, Settled, StateScope, StateView, TimerId, Tx, cadence,
};
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::{ExtensionId, PromptDelivery, TerminalOutcome};

use crate::contract::{
    EXTENSION_ID, LoopAction, LoopCommand, LoopMode, LoopProjection, LoopRecord, NAMESPACE,
    StoppedBy,
};
use crate::state::{self, CURRENT, Effect, LoopError, Settlement, TIMERS};

/// The Loop extension; add it with [`loop_grants`].
pub struct LoopExtension {
    definition: ExtensionDefinition,
}

impl LoopExtension {
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

/// Exactly what the host grants Loop: state, projection, tools, the `/loop` command,
/// timers for its cadence and admissions for its occurrences.
pub fn loop_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Projection)
        .with(Grant::Tools)
        .with(Grant::Commands)
        .with(Grant::Timers)
        .with(Grant::Admissions)
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

fn invalid(error: LoopError) -> HookError {
    HookError::Invalid(error.to_string())
}

pub(crate) fn current(tx: &Tx<'_>) -> Result<Option<LoopRecord>, HookError> {
    tx.get(StateScope::Session, CURRENT.0, CURRENT.1)
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
                if let Some(old) = timers.occurrence.take() {
                    tx.clear_timer(&old)?;
                }
                record.next_due = Some(cadence::next_after(&expression, tx.now())?);
                let id = tx.set_timer(Due::Cron(expression), payload(Purpose::Occurrence)?)?;
                timers.occurrence = Some(id);
            }
            Effect::ArmNext(at) => {
                if let Some(old) = timers.occurrence.take() {
                    tx.clear_timer(&old)?;
                }
                let id = tx.set_timer(Due::At(at), payload(Purpose::Occurrence)?)?;
                timers.occurrence = Some(id);
            }
            Effect::ArmExpiry(at) => {
                if let Some(old) = timers.expiry.take() {
                    tx.clear_timer(&old)?;
                }
                timers.expiry = Some(tx.set_timer(Due::At(at), payload(Purpose::Expiry)?)?);
            }
            Effect::DisarmOccurrence => {
                if let Some(old) = timers.occurrence.take() {
                    tx.clear_timer(&old)?;
                }
            }
            Effect::DisarmAll => {
                for old in [timers.occurrence.take(), timers.expiry.take()]
                    .into_iter()
                    .flatten()
                {
                    tx.clear_timer(&old)?;
                }
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

fn projection_value(record: Option<LoopRecord>) -> Result<Value, HookError> {
    serde_json::to_value(LoopProjection { current: record })
        .map_err(|error| HookError::Failed(error.to_string()))
}

impl Extension for LoopExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `/loop <start|pause|resume|stop>`; answers the loop as it stands afterwards.
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        if command != "loop" {
            return Err(HookError::UnknownCommand(command.to_owned()));
        }
        let input: LoopCommand = serde_json::from_value(input)
            .map_err(|error| HookError::Invalid(format!("/loop: {error}")))?;
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
        projection_value(Some(record))
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
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
        apply(tx, step).map(|_| ())
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
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
        apply(tx, state::settled(&record, n, settlement, now)).map(|_| ())
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let record: Option<LoopRecord> = state.get(StateScope::Session, CURRENT.0, CURRENT.1);
        serde_json::to_value(LoopProjection { current: record }).ok()
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let own_run = run
            .origin
            .filter(|o| o.extension_id.as_str() == EXTENSION_ID)
            .and_then(|o| state::parse_correlation(&o.correlation))
            .map(|(id, n)| (id.to_owned(), n));
        Contribution {
            prompt_section: None,
            tools: crate::tools::module(tools, own_run),
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(crate::catalog::catalog(self.definition.id.clone()))
    }
}
