//! Model tools declared to the kit: a Rust input type whose JSON schema is derived
//! once, checked against the capabilities' schema subset, and decoded for the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shiitake_capabilities::{
    ExecutionId, InvocationContext, Operation, OperationName, Replay, Schema, ToolError,
};

use super::KitError;
use crate::extension::host::ToolTx;
use crate::extension::{HookError, Tx};

/// What a tool handler knows of its call: the run's facts (what the extension's
/// `run_facts` read when the run started) and the call's execution id.
#[derive(Debug)]
pub struct ToolCall<R> {
    /// What the extension read of the run when it started.
    pub run: R,
    /// `<command id>:<call id>`; stable across a replay after a restart.
    pub execution_id: ExecutionId,
}

/// What an async tool handler gets: the call, the owner's transaction door and the
/// invocation (cancellation, deadline).
pub struct AsyncToolCall<R> {
    /// The run's facts and the execution id.
    pub call: ToolCall<R>,
    /// Runs transactions in the Session's owner.
    pub tools: ToolTx,
    /// Cancellation, remaining time and newer input of this call.
    pub ctx: InvocationContext,
}

type SyncHandler<R> =
    Arc<dyn Fn(&mut Tx<'_>, Value, &ToolCall<R>) -> Result<Value, HookError> + Send + Sync>;
type BoxFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;
type AsyncHandler<R> = Arc<dyn Fn(AsyncToolCall<R>, Value) -> BoxFuture + Send + Sync>;

enum Handler<R> {
    /// Runs inside one owner transaction.
    InTransaction(SyncHandler<R>),
    /// Runs on the run's task and may wait; it reaches state through [`ToolTx`].
    Async(AsyncHandler<R>),
}

/// One model tool of an extension, declared once.
pub struct Tool<R> {
    name: OperationName,
    description: String,
    schema: Value,
    replay: Replay,
    offered: Arc<dyn Fn(&R) -> bool + Send + Sync>,
    handler: Handler<R>,
}

/// The advertised schema of `I`: derived by schemars with sub-schemas inlined, so
/// it stays within the capabilities' subset, and refused at registration when not.
fn schema_of<I: JsonSchema>(tool: &str) -> Result<Value, KitError> {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema =
        serde_json::to_value(generator.into_root_schema_for::<I>()).map_err(|error| {
            KitError::Schema {
                tool: tool.to_owned(),
                reason: error.to_string(),
            }
        })?;
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
        // The type's own doc is for Rust readers; the model reads the tool's description.
        map.remove("description");
    }
    consts_to_enums(&mut schema);
    for_the_model(&mut schema);
    if let Some(reason) = Schema::new(schema.clone()).opaque_reason() {
        return Err(KitError::Schema {
            tool: tool.to_owned(),
            reason: format!("{} at {}", reason.reason, reason.path),
        });
    }
    Ok(schema)
}

/// Drops what a model reads as noise: the doc of each array's item type (the array's
/// own field doc says what the items are) and schemars' integer `format`s (`uint32`),
/// which the bounds already say and the capabilities' subset does not check.
fn for_the_model(schema: &mut Value) {
    walk_schema(schema, false);
}

/// Walks one schema; `item` when it is an array's `items`. Values that are data, not
/// schemas (`enum`, `const`, `default`, `required`), are left alone, and a property map
/// is walked by value, so a property named `items` or `format` is only a name.
fn walk_schema(schema: &mut Value, item: bool) {
    let Value::Object(map) = schema else {
        if let Value::Array(branches) = schema {
            branches
                .iter_mut()
                .for_each(|branch| walk_schema(branch, false));
        }
        return;
    };
    let integer_format = map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|format| format.starts_with("int") || format.starts_with("uint"));
    if integer_format {
        map.remove("format");
    }
    if item {
        map.remove("description");
    }
    for (keyword, value) in map.iter_mut() {
        match keyword.as_str() {
            "items" => walk_schema(value, true),
            "properties" | "$defs" | "patternProperties" => {
                if let Value::Object(named) = value {
                    named
                        .values_mut()
                        .for_each(|property| walk_schema(property, false));
                }
            }
            "enum" | "const" | "default" | "examples" | "required" => {}
            _ => walk_schema(value, false),
        }
    }
}

/// Rewrites each `oneOf` whose branches are all single constants (what schemars
/// derives for a documented unit-variant enum) as the equal `enum`, which the subset has.
fn consts_to_enums(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let values: Option<Vec<Value>> = map
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|branches| branches.iter().map(single_constant).collect());
            if let Some(values) = values {
                map.remove("oneOf");
                map.insert("enum".to_owned(), Value::Array(values));
            }
            map.values_mut().for_each(consts_to_enums);
        }
        Value::Array(items) => items.iter_mut().for_each(consts_to_enums),
        _ => {}
    }
}

/// The one value a branch allows, when it is `{"const": v}` or `{"enum": [v]}`.
fn single_constant(branch: &Value) -> Option<Value> {
    if let Some(value) = branch.get("const") {
        return Some(value.clone());
    }
    match branch
        .get("enum")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([value]) => Some(value.clone()),
        _ => None,
    }
}

fn decode<I: DeserializeOwned>(tool: &str, input: Value) -> Result<I, String> {
    serde_json::from_value(input).map_err(|error| format!("{tool}: {error}"))
}

impl<R> Tool<R> {
    pub(super) fn name(&self) -> &OperationName {
        &self.name
    }

    pub(super) fn schema(&self) -> &Value {
        &self.schema
    }
}

impl<R: Clone + Send + Sync + 'static> Tool<R> {
    /// A tool whose handler runs inside one owner transaction, like a command.
    pub fn new<I, F>(name: &str, description: &str, handler: F) -> Result<Self, KitError>
    where
        I: DeserializeOwned + JsonSchema,
        F: Fn(&mut Tx<'_>, I, &ToolCall<R>) -> Result<Value, HookError> + Send + Sync + 'static,
    {
        let label = name.to_owned();
        let handler: SyncHandler<R> = Arc::new(move |tx, input, call| {
            handler(tx, decode(&label, input).map_err(HookError::Invalid)?, call)
        });
        Self::with_handler::<I>(name, description, Handler::InTransaction(handler))
    }

    /// A tool whose handler may wait (for a person, another Agent, a file): it runs
    /// on the run's task and reaches state through [`AsyncToolCall::tools`].
    pub fn waiting<I, F, Fut>(name: &str, description: &str, handler: F) -> Result<Self, KitError>
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(AsyncToolCall<R>, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        let label = name.to_owned();
        let handler = Arc::new(handler);
        let handler: AsyncHandler<R> = Arc::new(move |call, input| {
            let handler = handler.clone();
            let label = label.clone();
            Box::pin(async move {
                let input = decode(&label, input).map_err(ToolError::for_model)?;
                handler(call, input).await
            })
        });
        Self::with_handler::<I>(name, description, Handler::Async(handler))
    }

    fn with_handler<I: JsonSchema>(
        name: &str,
        description: &str,
        handler: Handler<R>,
    ) -> Result<Self, KitError> {
        Ok(Self {
            name: OperationName::new(name).map_err(|error| KitError::Name {
                name: name.to_owned(),
                reason: error.to_string(),
            })?,
            description: description.to_owned(),
            schema: schema_of::<I>(name)?,
            replay: Replay::Unsafe,
            offered: Arc::new(|_| true),
            handler,
        })
    }

    /// Declares how a repeated call after a restart behaves (see [`Replay`]).
    #[must_use]
    pub fn replay(mut self, replay: Replay) -> Self {
        self.replay = replay;
        self
    }

    /// Offers the tool only to runs whose facts satisfy `offered`.
    #[must_use]
    pub fn offered_when(mut self, offered: impl Fn(&R) -> bool + Send + Sync + 'static) -> Self {
        self.offered = Arc::new(offered);
        self
    }

    /// The operation offered to one run, when its facts let it be offered.
    pub(super) fn operation(&self, run: &R, tools: &ToolTx) -> Option<Operation> {
        if !(self.offered)(run) {
            return None;
        }
        let run = run.clone();
        let tools = tools.clone();
        let operation = match &self.handler {
            Handler::InTransaction(handler) => {
                let handler = handler.clone();
                Operation::from_fn(
                    self.name.clone(),
                    self.description.clone(),
                    move |input, ctx: InvocationContext| {
                        let handler = handler.clone();
                        let tools = tools.clone();
                        let call = ToolCall {
                            run: run.clone(),
                            execution_id: ctx.execution_id().clone(),
                        };
                        async move { tools.run(move |tx| handler(tx, input, &call)).await }
                    },
                )
            }
            Handler::Async(handler) => {
                let handler = handler.clone();
                Operation::from_fn(
                    self.name.clone(),
                    self.description.clone(),
                    move |input, ctx: InvocationContext| {
                        let call = AsyncToolCall {
                            call: ToolCall {
                                run: run.clone(),
                                execution_id: ctx.execution_id().clone(),
                            },
                            tools: tools.clone(),
                            ctx,
                        };
                        handler(call, input)
                    },
                )
            }
        };
        Some(
            operation
                .with_input_schema(self.schema.clone())
                .with_replay(self.replay),
        )
    }
}
