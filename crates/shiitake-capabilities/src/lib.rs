//! Capabilities: the tools a Shiitake model can call, and the one door through which it calls them.
//!
//! **What it owns.** A [`CapabilitySource`] (Files, the Computers list, one
//! MCP server, an extension) advertises [`Module`]s; a module lives at a
//! [`ModulePath`] such as `files`, `env.computers.<name>` or `env.mcp.<name>`
//! and holds [`Operation`]s. An operation has a guest-identifier name, a
//! description, an input JSON Schema (checked through the documented subset in
//! [`schema`]), an optional output schema, a [`Replay`] flag, and an async
//! [`OperationHandler`]. A [`Catalog`] holds the sources, lists their live
//! modules, turns operations into model tools ([`ToolSpec`]), answers
//! [`Catalog::describe`], and refreshes after a source is invalidated or
//! closed, reporting a [`CatalogDiff`].
//!
//! **Names.** Operation paths are dotted (`env.mcp.notes.create_note`); every
//! segment is a guest identifier, `[a-z][a-z0-9]*(_[a-z0-9]+)*` of at most 64
//! bytes ([`names`]). Foreign names are mapped (`create-note` → `create_note`)
//! and collisions are errors naming both originals. Model providers forbid
//! dots, so a path flattens to a tool name by joining segments with `__`
//! (`env__mcp__notes__create_note`), hashed when longer than 64 bytes
//! ([`tool_name`]); [`Catalog::resolve_tool_name`] maps back.
//!
//! **The execute door.** [`Catalog::execute`] validates the input (applying
//! defaults), then runs the handler with an [`InvocationContext`] (execution
//! id, the run's cancellation token, an optional deadline), racing it against
//! both so a cancel or deadline ends the call promptly even when the handler
//! ignores them. Failures are a [`ToolError`]: `ForModel` becomes a tool error
//! result, `Cancelled` settles the run as cancelled, `Fatal` fails the run.
//!
//! ```
//! use serde_json::json;
//! use shiitake_capabilities::{
//!     Catalog, ExecutionId, InvocationContext, Module, ModulePath, Operation,
//!     OperationName, OperationPath, Replay, SourceId, StaticSource,
//! };
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let echo = Operation::from_fn(OperationName::new("echo")?, "Returns its input.", |input, _ctx| async move {
//!     Ok(input)
//! })
//! .with_input_schema(json!({ "type": "object", "properties": { "text": { "type": "string" } } }))
//! .with_replay(Replay::Safe);
//! let module = Module::new(ModulePath::new("demo")?, "A demo.").with_operation(echo)?;
//!
//! let catalog = Catalog::new();
//! catalog.add_source(Arc::new(StaticSource::new(SourceId::new("demo"), vec![module]))).await?;
//! let path = catalog.resolve_tool_name("demo__echo").ok_or("unknown tool")?;
//! assert_eq!(path, OperationPath::parse("demo.echo")?);
//!
//! let ctx = InvocationContext::new(ExecutionId::generate(), CancellationToken::new());
//! let output = catalog.execute(&path, json!({ "text": "hi" }), &ctx).await?;
//! assert_eq!(output, json!({ "text": "hi" }));
//! # Ok(())
//! # }
//! ```
//!
//! **What it does not own.** Sessions, the run loop, persistence of results,
//! and the sources themselves (Knapsack implements Files, Computers and MCP).
//! `docs/capabilities.md` in the repository describes the model in full.

mod catalog;
mod context;
mod error;
mod execute;
mod module;
pub mod names;
mod operation;
pub mod schema;
mod snapshot;
mod source;
pub mod tool_name;

pub use catalog::{Catalog, CatalogError};
pub use context::{ExecutionId, InvocationContext, NewerInput, Progress, ProgressNote};
pub use error::{FatalError, ForModelError, ForModelKind, ToolError};
pub use execute::execute_operation;
pub use module::{Module, ModuleDescriptor};
pub use names::{
    ModulePath, NameError, OperationName, OperationPath, map_foreign_names, to_guest_identifier,
};
pub use operation::{
    CallFacts, CallFactsFn, Operation, OperationDescriptor, OperationHandler, Replay, handler_fn,
};
pub use schema::{Schema, SchemaError, ValidationError};
pub use snapshot::{CatalogDiff, CatalogProblem, ToolSpec};
pub use source::{
    CapabilitySource, Invalidations, Invalidator, LeftOutPart, SourceError, SourceId, SourceState,
    StaticSource,
};
pub use tool_name::{ToolName, flatten, unflatten};
