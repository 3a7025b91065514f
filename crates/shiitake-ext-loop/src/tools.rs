//! The model tools `loop.get`, `loop.start`, `loop.stop` and `loop.schedule_next`,
//! offered to every run; their input schemas are derived from the input types.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use shiitake_capabilities::Replay;
use shiitake_core::extension::HookError;
use shiitake_core::extension::kit::{KitError, Tool};

use crate::contract::{LoopProjection, LoopRecord, ScheduleNext, StartLoop, StoppedBy};
use crate::extension::{OwnRun, apply, current, invalid, start, stop};
use crate::state;

/// No input: an empty object.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

/// What every tool answers: the loop as it stands (the projection's shape).
fn answer(record: Option<LoopRecord>) -> Result<Value, HookError> {
    serde_json::to_value(LoopProjection { current: record })
        .map_err(|error| HookError::Failed(error.to_string()))
}

/// The four tools, each running in one owner transaction.
pub(crate) fn tools() -> Result<[Tool<OwnRun>; 4], KitError> {
    let get = Tool::new(
        "get",
        "The Session's loop, or null.",
        |tx, _: NoInput, _| answer(current(tx)?),
    )?
    .replay(Replay::Safe);
    let start = Tool::new(
        "start",
        "Start the Session's loop: repeat `prompt` on a Unix cron `cadence` (UTC; the loop \
         expires after seven days), or without a cadence self-paced (each occurrence's run \
         asks for the next with loop.schedule_next). One loop per Session.",
        |tx, input: StartLoop, _| answer(Some(start(tx, input.prompt, input.cadence)?)),
    )?;
    let stop = Tool::new("stop", "Stop the Session's loop.", |tx, _: NoInput, _| {
        answer(Some(stop(tx, StoppedBy::Model)?))
    })?;
    let schedule_next = Tool::<OwnRun>::new(
        "schedule_next",
        "In a run of the active self-paced loop only: run the loop again `delaySeconds` after \
         this run ends. Not calling it ends the loop.",
        |tx, input: ScheduleNext, call| {
            let record = current(tx)?;
            let run = call.run.as_ref().map(|(id, n)| (id.as_str(), *n));
            let next =
                state::schedule_next(record.as_ref(), run, input.delay_seconds).map_err(invalid)?;
            answer(Some(apply(tx, (next, Vec::new()))?))
        },
    )?
    // Asking twice for the same wait asks once.
    .replay(Replay::Safe);
    Ok([get, start, stop, schedule_next])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::contract::{MAX_CADENCE_BYTES, MAX_DELAY_SECONDS, MAX_PROMPT_BYTES};

    /// The schemas the tools advertised when they were written by hand.
    fn hand_written() -> BTreeMap<&'static str, Value> {
        BTreeMap::from([
            (
                "get",
                json!({"type": "object", "additionalProperties": false}),
            ),
            (
                "stop",
                json!({"type": "object", "additionalProperties": false}),
            ),
            (
                "start",
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_BYTES},
                        "cadence": {"type": "string", "minLength": 1, "maxLength": MAX_CADENCE_BYTES}
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
            ),
            (
                "schedule_next",
                json!({
                    "type": "object",
                    "properties": {
                        "delaySeconds": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_SECONDS}
                    },
                    "required": ["delaySeconds"],
                    "additionalProperties": false
                }),
            ),
        ])
    }

    /// The keys of the old schema that say what input is allowed, as in `derived`.
    fn same_rules(old: &Value, derived: &Value, at: &str) {
        let Value::Object(old) = old else {
            assert_eq!(old, derived, "{at}");
            return;
        };
        for (key, value) in old {
            let path = format!("{at}/{key}");
            let derived_value = &derived[key.as_str()];
            if key == "properties" {
                for (name, property) in value.as_object().unwrap() {
                    same_rules(
                        property,
                        &derived_value[name.as_str()],
                        &format!("{path}/{name}"),
                    );
                }
                let names = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
                assert_eq!(names(value), names(derived_value), "{path}");
            } else {
                assert_eq!(value, derived_value, "{path}");
            }
        }
    }

    #[test]
    fn the_derived_schemas_carry_the_bounds_and_refuse_unknown_fields() {
        let extension = crate::extension().unwrap();
        let derived: BTreeMap<&str, &Value> = extension.tool_schemas().collect();
        let old = hand_written();
        assert_eq!(
            derived.keys().collect::<Vec<_>>(),
            old.keys().collect::<Vec<_>>()
        );
        for (name, schema) in &old {
            same_rules(schema, derived[name], name);
        }
    }
}
