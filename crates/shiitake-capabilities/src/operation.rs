//! Operations: a named, described, schema-checked handler with a replay flag.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::InvocationContext;
use crate::error::ToolError;
use crate::names::{NameError, OperationName, OperationPath, to_guest_identifier};
use crate::schema::{OpaqueReason, Schema};
use crate::tool_name::{ToolName, flatten};

/// Whether an operation may run again after a crash left its outcome unknown.
///
/// Recovery re-executes a call without a committed result only when its
/// operation is `Safe`; otherwise the model is told the outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replay {
    /// Running it twice is harmless (reads, idempotent writes).
    Safe,
    /// It may change the world; run at most once. The default.
    Unsafe,
}

/// The code behind an operation; it receives input already decoded by the schema.
///
/// A handler should watch `ctx.cancellation()`, but the execute door stops
/// waiting for it on cancel or deadline regardless.
#[async_trait]
pub trait OperationHandler: Send + Sync + 'static {
    /// Runs the operation once.
    async fn call(&self, input: Value, ctx: &InvocationContext) -> Result<Value, ToolError>;
}

struct FnHandler<F>(F);

#[async_trait]
impl<F, Fut> OperationHandler for FnHandler<F>
where
    F: Fn(Value, InvocationContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    async fn call(&self, input: Value, ctx: &InvocationContext) -> Result<Value, ToolError> {
        (self.0)(input, ctx.clone()).await
    }
}

/// Wraps an async closure as a handler; the closure gets its own copy of the context.
pub fn handler_fn<F, Fut>(f: F) -> Arc<dyn OperationHandler>
where
    F: Fn(Value, InvocationContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    Arc::new(FnHandler(f))
}

/// What a person deciding about one call should know besides its arguments, as only the
/// operation can say (where a command runs, whether it reaches the network): names to
/// short values, which an approval shows beside the arguments.
pub type CallFacts = std::collections::BTreeMap<String, String>;

/// Reads the [`CallFacts`] of one call from its input (as the model sent it).
pub type CallFactsFn = Arc<dyn Fn(&Value) -> CallFacts + Send + Sync>;

/// One operation as a module advertises it: what the model sees as one tool.
///
/// Built with [`Operation::new`] (or [`Operation::foreign`] for a name from
/// another grammar) and the `with_*` methods. Defaults: input schema
/// `{"type":"object"}`, no output schema, [`Replay::Unsafe`].
#[derive(Clone)]
pub struct Operation {
    name: OperationName,
    foreign_name: Option<String>,
    description: String,
    input_schema: Schema,
    output_schema: Option<Schema>,
    replay: Replay,
    handler: Arc<dyn OperationHandler>,
    facts: Option<CallFactsFn>,
}

impl Operation {
    /// An operation named by a guest identifier.
    pub fn new(
        name: OperationName,
        description: impl Into<String>,
        handler: Arc<dyn OperationHandler>,
    ) -> Self {
        Self {
            name,
            foreign_name: None,
            description: description.into(),
            input_schema: Schema::any_object(),
            output_schema: None,
            replay: Replay::Unsafe,
            handler,
            facts: None,
        }
    }

    /// An operation with an async closure as its handler.
    pub fn from_fn<F, Fut>(name: OperationName, description: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value, InvocationContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self::new(name, description, handler_fn(f))
    }

    /// An operation whose advertised name (e.g. an MCP tool's `create-note`) is mapped
    /// onto the guest grammar; the original is kept so the source can call it.
    pub fn foreign(
        original: &str,
        description: impl Into<String>,
        handler: Arc<dyn OperationHandler>,
    ) -> Result<Self, NameError> {
        let mut op = Self::new(to_guest_identifier(original)?, description, handler);
        op.foreign_name = Some(original.to_owned());
        Ok(op)
    }

    /// Sets the input schema (compiled; outside the subset it is opaque).
    #[must_use]
    pub fn with_input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Schema::new(schema);
        self
    }

    /// Sets the advertised output schema (described, not enforced).
    #[must_use]
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(Schema::new(schema));
        self
    }

    /// Sets the replay flag.
    #[must_use]
    pub fn with_replay(mut self, replay: Replay) -> Self {
        self.replay = replay;
        self
    }

    /// Sets what a person deciding about a call is told besides its arguments.
    #[must_use]
    pub fn with_call_facts(mut self, facts: CallFactsFn) -> Self {
        self.facts = Some(facts);
        self
    }

    /// What a person deciding about the call with `input` should know (none for most
    /// operations).
    pub fn call_facts(&self, input: &Value) -> CallFacts {
        self.facts
            .as_ref()
            .map_or_else(CallFacts::new, |facts| facts(input))
    }

    /// The guest identifier.
    pub fn name(&self) -> &OperationName {
        &self.name
    }

    /// The name as advertised in its own grammar, when it was mapped.
    pub fn foreign_name(&self) -> Option<&str> {
        self.foreign_name.as_deref()
    }

    /// The description the model reads.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The compiled input schema.
    pub fn input_schema(&self) -> &Schema {
        &self.input_schema
    }

    /// The advertised output schema, if any.
    pub fn output_schema(&self) -> Option<&Schema> {
        self.output_schema.as_ref()
    }

    /// Whether the operation may be re-run after a crash.
    pub fn replay(&self) -> Replay {
        self.replay
    }

    /// The handler.
    pub fn handler(&self) -> &Arc<dyn OperationHandler> {
        &self.handler
    }

    /// What `describe` returns for this operation at `path`.
    pub fn descriptor(&self, path: OperationPath) -> OperationDescriptor {
        OperationDescriptor {
            tool_name: flatten(&path),
            path,
            foreign_name: self.foreign_name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.raw().clone(),
            output_schema: self.output_schema.as_ref().map(|s| s.raw().clone()),
            replay: self.replay,
            opaque_input: self.input_schema.opaque_reason().cloned(),
        }
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("name", &self.name)
            .field("foreign_name", &self.foreign_name)
            .field("replay", &self.replay)
            .finish_non_exhaustive()
    }
}

/// The description of one operation: what `describe(path)` answers (camelCase JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationDescriptor {
    /// The dotted operation path, e.g. `env.mcp.notes.create_note`.
    pub path: OperationPath,
    /// The provider tool name the model calls it by.
    pub tool_name: ToolName,
    /// The name as advertised in a foreign grammar, when mapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_name: Option<String>,
    /// What it does, for the model.
    pub description: String,
    /// The input JSON Schema as advertised.
    pub input_schema: Value,
    /// The output JSON Schema, if advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Whether it may be re-run after a crash.
    pub replay: Replay,
    /// Set when the input schema is outside the subset (any object is accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque_input: Option<OpaqueReason>,
}
