//! The model tools: `loop.get`, `loop.start`, `loop.stop`, `loop.schedule_next`.

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay, ToolError};
use shiitake_core::extension::host::ToolTx;

use crate::contract::{
    LoopProjection, MAX_CADENCE_BYTES, MAX_DELAY_SECONDS, MAX_PROMPT_BYTES, NAMESPACE,
    ScheduleNext, StartLoop, StoppedBy,
};
use crate::extension::{apply, current, start, stop};
use crate::state;

fn decode<T: serde::de::DeserializeOwned>(input: Value, tool: &str) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|error| ToolError::for_model(format!("{tool}: {error}")))
}

fn answer(
    record: Option<crate::contract::LoopRecord>,
) -> Result<Value, shiitake_core::extension::HookError> {
    serde_json::to_value(LoopProjection { current: record })
        .map_err(|error| shiitake_core::extension::HookError::Failed(error.to_string()))
}

/// The `loop` module offered to every run; `own_run` is this run's loop occurrence, if any.
pub(crate) fn module(tools: ToolTx, own_run: Option<(String, u64)>) -> Option<Module> {
    let op = |name: &str| OperationName::new(name).ok();
    let get = {
        let tools = tools.clone();
        Operation::from_fn(
            op("get")?,
            "The Session's loop, or null.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move { tools.run(|tx| answer(current(tx)?)).await }
            },
        )
        .with_input_schema(json!({"type": "object", "additionalProperties": false}))
        .with_replay(Replay::Safe)
    };
    let start_op = {
        let tools = tools.clone();
        Operation::from_fn(
            op("start")?,
            "Start the Session's loop: repeat `prompt` on a Unix cron `cadence` (UTC; the loop \
             expires after seven days), or without a cadence self-paced (each occurrence's run \
             asks for the next with loop.schedule_next). One loop per Session.",
            move |input, _ctx| {
                let tools = tools.clone();
                async move {
                    let input: StartLoop = decode(input, "loop.start")?;
                    tools
                        .run(move |tx| answer(Some(start(tx, input.prompt, input.cadence)?)))
                        .await
                }
            },
        )
        .with_input_schema(json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_BYTES},
                "cadence": {"type": "string", "minLength": 1, "maxLength": MAX_CADENCE_BYTES}
            },
            "required": ["prompt"],
            "additionalProperties": false
        }))
    };
    let stop_op = {
        let tools = tools.clone();
        Operation::from_fn(
            op("stop")?,
            "Stop the Session's loop.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move {
                    tools
                        .run(|tx| answer(Some(stop(tx, StoppedBy::Model)?)))
                        .await
                }
            },
        )
        .with_input_schema(json!({"type": "object", "additionalProperties": false}))
    };
    let schedule_next = Operation::from_fn(
        op("schedule_next")?,
        "In a run of the active self-paced loop only: run the loop again `delaySeconds` after \
         this run ends. Not calling it ends the loop.",
        move |input, _ctx| {
            let tools = tools.clone();
            let own_run = own_run.clone();
            async move {
                let input: ScheduleNext = decode(input, "loop.schedule_next")?;
                tools
                    .run(move |tx| {
                        let record = current(tx)?;
                        let run = own_run.as_ref().map(|(id, n)| (id.as_str(), *n));
                        let next = state::schedule_next(record.as_ref(), run, input.delay_seconds)
                            .map_err(|error| {
                                shiitake_core::extension::HookError::Invalid(error.to_string())
                            })?;
                        answer(Some(apply(tx, (next, Vec::new()))?))
                    })
                    .await
            }
        },
    )
    .with_input_schema(json!({
        "type": "object",
        "properties": {
            "delaySeconds": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_SECONDS}
        },
        "required": ["delaySeconds"],
        "additionalProperties": false
    }))
    // Asking twice for the same wait asks once.
    .with_replay(Replay::Safe);
    let mut module = Module::new(ModulePath::new(NAMESPACE).ok()?, "The Session's loop.");
    for operation in [get, start_op, stop_op, schedule_next] {
        module.add_operation(operation).ok()?;
    }
    Some(module)
}
