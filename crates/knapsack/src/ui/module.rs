//! The `ui` module a run borrows: `ui.discover` and `ui.execute`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use shiitake_capabilities::{
    ForModelError, ForModelKind, InvocationContext, Module, ModulePath, Operation, OperationName,
    Replay, ToolError,
};

use super::error::UiError;
use super::host::SessionHost;
use super::limits::MAX_COMMAND_NAME_BYTES;
use super::wire::RequestKind;

/// Input of `ui.execute`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecuteInput {
    command: String,
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Sends one request and waits for it, giving up with the run.
async fn ask(
    host: &Arc<SessionHost>,
    kind: RequestKind,
    ctx: &InvocationContext,
) -> Result<Value, ToolError> {
    tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => Err(ToolError::Cancelled),
        result = host.request(kind) => result.map_err(|error| error.to_tool_error()),
    }
}

/// The module over `host`; every operation holds the host open until the module is dropped.
pub(crate) fn ui_module(host: Arc<SessionHost>) -> Result<Module, UiError> {
    let discover_host = host.clone();
    let discover = Operation::from_fn(
        OperationName::new("discover")?,
        "Lists the commands of the App open in the person's browser for this Session, \
         with their input schemas. The list is live: ask again when the App may have changed.",
        move |_input, ctx| {
            let host = discover_host.clone();
            async move { ask(&host, RequestKind::Discover, &ctx).await }
        },
    )
    .with_input_schema(json!({ "type": "object", "properties": {}, "additionalProperties": false }))
    .with_output_schema(json!({
        "type": "object",
        "properties": {
            "commands": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string" },
                        "description": { "type": "string" },
                        "inputSchema": { "type": "object" }
                    },
                    "required": ["name", "description"]
                }
            }
        },
        "required": ["commands"]
    }))
    .with_replay(Replay::Safe);
    let execute = Operation::from_fn(
        OperationName::new("execute")?,
        "Runs one command of the App open in the person's browser (see ui.discover) with a \
         JSON object as its input, and returns the command's result.",
        move |input, ctx| {
            let host = host.clone();
            async move {
                let input: ExecuteInput = serde_json::from_value(input).map_err(|error| {
                    ToolError::ForModel(ForModelError::new(
                        ForModelKind::InvalidInput,
                        format!("ui.execute wants {{command, input}}: {error}"),
                    ))
                })?;
                let kind = RequestKind::Execute {
                    command: input.command,
                    input: input.input,
                };
                ask(&host, kind, &ctx).await
            }
        },
    )
    .with_input_schema(json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_COMMAND_NAME_BYTES,
                "description": "A command name from ui.discover."
            },
            "input": {
                "type": "object",
                "default": {},
                "description": "The command's input, as its inputSchema describes."
            }
        },
        "required": ["command"],
        "additionalProperties": false
    }))
    .with_replay(Replay::Unsafe);
    Module::new(
        ModulePath::new("ui")?,
        "The App open in the person's browser for this Session.",
    )
    .with_operation(discover)?
    .with_operation(execute)
    .map_err(UiError::from)
}
