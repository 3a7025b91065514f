//! Computers: capture one provider's advertised operations as `env.computers.<name>`,
//! or follow a host-owned list of them.

mod list;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiitake_capabilities::{
    InvocationContext, Module, ModulePath, NameError, Operation, OperationHandler, Replay,
    SourceId, StaticSource, ToolError,
};
use tokio_util::sync::CancellationToken;

use crate::files_module::FilesConnection;
use crate::limits::{COMPUTER_DESCRIBE_TIMEOUT, COMPUTER_OPERATION_LIMIT};
use crate::port::Files;

pub use list::{ComputersOptions, ComputersSource, Unavailable};

/// One operation as a Computer advertises it, in the provider's own naming.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdvertisedOperation {
    /// The provider's name (mapped onto the guest grammar: `create-note` becomes `create_note`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its input JSON Schema; it must describe an object.
    pub input_schema: Value,
}

/// A provider that owns operation implementations, schemas, storage and execution.
///
/// Knapsack only reads its advertisement and forwards calls with the caller's
/// invocation context; the provider remains responsible for admission on each call.
#[async_trait]
pub trait Computer: Send + Sync + 'static {
    /// Advertises the operations; should stop early when `cancel` fires.
    async fn describe(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Vec<AdvertisedOperation>, String>;

    /// Runs one advertised operation (by its advertised name).
    async fn call(
        &self,
        operation: &str,
        input: Value,
        ctx: &InvocationContext,
    ) -> Result<Value, ToolError>;

    /// The Computer's own Files port, projected as `env.computers.<name>.files`.
    fn files(&self) -> Option<Arc<dyn Files>> {
        None
    }
}

/// A Computer the host has already admitted, with the authority id and name it chose.
#[derive(Clone)]
pub struct ComputerConnection {
    /// The authority id: the capability source id shared by the commands and the files.
    pub id: String,
    /// The guest identifier under `env.computers`.
    pub name: String,
    /// The provider.
    pub computer: Arc<dyn Computer>,
}

impl std::fmt::Debug for ComputerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputerConnection")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why a Computer could not be captured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputerError {
    /// The provider refused to describe itself.
    #[error("computer `{name}` rejected description: {message}")]
    Rejected {
        /// The Computer's name.
        name: String,
        /// The provider's message.
        message: String,
    },
    /// The provider did not describe itself in time.
    #[error("computer `{name}` did not describe itself within {after:?}")]
    TimedOut {
        /// The Computer's name.
        name: String,
        /// The timeout.
        after: Duration,
    },
    /// The provider advertised more operations than allowed.
    #[error("computer `{name}` advertises {count} operations; at most {limit} are allowed")]
    TooManyOperations {
        /// The Computer's name.
        name: String,
        /// How many it advertised.
        count: usize,
        /// The bound.
        limit: usize,
    },
    /// An operation's schema or name cannot be used.
    #[error("computer `{name}` advertises an unusable operation `{operation}`: {reason}")]
    Unusable {
        /// The Computer's name.
        name: String,
        /// The operation's advertised name.
        operation: String,
        /// Why.
        reason: String,
    },
    /// The Computer's name is not a guest identifier.
    #[error("computer name `{name}` is not usable: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Acquisition was cancelled by its caller.
    #[error("computer acquisition was cancelled")]
    Cancelled,
}

/// Forwards a call to the provider with the caller's context.
struct Forward {
    computer: Arc<dyn Computer>,
    operation: String,
}

#[async_trait]
impl OperationHandler for Forward {
    async fn call(&self, input: Value, ctx: &InvocationContext) -> Result<Value, ToolError> {
        self.computer.call(&self.operation, input, ctx).await
    }
}

/// Describes `connection` under `timeout` and `cancel`, and builds its modules:
/// `env.computers.<name>` and, when it has a Files port, `env.computers.<name>.files`.
pub async fn capture(
    connection: &ComputerConnection,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Vec<Module>, ComputerError> {
    let name = connection.name.clone();
    let invalid_name = |e: NameError| ComputerError::InvalidName {
        name: name.clone(),
        reason: e.to_string(),
    };
    let path = ModulePath::new(format!("env.computers.{name}")).map_err(invalid_name)?;
    let describe_token = cancel.child_token();
    let _stop_describe = describe_token.clone().drop_guard();
    let advertised = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(ComputerError::Cancelled),
        () = tokio::time::sleep(timeout) => {
            return Err(ComputerError::TimedOut { name, after: timeout });
        }
        described = connection.computer.describe(&describe_token) => described,
    }
    .map_err(|message| ComputerError::Rejected {
        name: name.clone(),
        message,
    })?;
    if advertised.len() > COMPUTER_OPERATION_LIMIT {
        return Err(ComputerError::TooManyOperations {
            name,
            count: advertised.len(),
            limit: COMPUTER_OPERATION_LIMIT,
        });
    }
    let mut module = Module::new(
        path.clone(),
        format!("Operations of the computer `{name}`."),
    );
    for op in advertised {
        let unusable = |reason: String| ComputerError::Unusable {
            name: name.clone(),
            operation: op.name.clone(),
            reason,
        };
        check_schema(&op.input_schema).map_err(|r| unusable(r.to_owned()))?;
        let handler = Arc::new(Forward {
            computer: connection.computer.clone(),
            operation: op.name.clone(),
        });
        let operation = Operation::foreign(&op.name, op.description.clone(), handler)
            .map_err(|e| unusable(e.to_string()))?
            .with_input_schema(op.input_schema.clone())
            .with_replay(Replay::Unsafe);
        module
            .add_operation(operation)
            .map_err(|e| unusable(e.to_string()))?;
    }
    let mut modules = vec![module];
    if let Some(port) = connection.computer.files() {
        let files_path = ModulePath::new(format!("{path}.files")).map_err(invalid_name)?;
        let files = FilesConnection::new(port)
            .and_then(|c| c.module_at(files_path))
            .map_err(invalid_name)?;
        modules.push(files);
    }
    Ok(modules)
}

/// An input schema must be a JSON object describing an object (or leave `type` out).
pub(crate) fn check_schema(schema: &Value) -> Result<(), &'static str> {
    let Some(map) = schema.as_object() else {
        return Err("the input schema is not a JSON object");
    };
    match map.get("type") {
        None => Ok(()),
        Some(Value::String(t)) if t == "object" => Ok(()),
        Some(_) => Err("the input schema does not describe an object"),
    }
}

/// The entry points of Knapsack: each turns something the host trusts into a capability source.
#[derive(Debug, Clone, Copy, Default)]
pub struct Knapsack;

impl Knapsack {
    /// Projects one Files port as the `files` module and its direct tools.
    pub fn files(port: Arc<dyn Files>) -> Result<FilesConnection, NameError> {
        FilesConnection::new(port)
    }

    /// Captures one Computer (10 s default timeout) as a source whose id is its authority id.
    pub async fn computer(
        connection: ComputerConnection,
        cancel: &CancellationToken,
    ) -> Result<StaticSource, ComputerError> {
        let modules = capture(&connection, COMPUTER_DESCRIBE_TIMEOUT, cancel).await?;
        Ok(StaticSource::new(SourceId::new(connection.id), modules))
    }

    /// Connects a host-owned list of MCP servers as `env.mcp.<name>` modules; see
    /// [`crate::mcp::McpServersSource`]. Nothing connects until the first acquisition.
    #[cfg(feature = "mcp")]
    pub fn mcp_servers(
        id: SourceId,
        servers: Vec<crate::mcp::McpServer>,
        options: crate::mcp::McpServersOptions,
    ) -> crate::mcp::McpServersSource {
        crate::mcp::McpServersSource::new(id, servers, options)
    }

    /// Follows a host-owned Computer list; see [`ComputersSource`].
    pub fn computers(
        id: SourceId,
        list: tokio::sync::watch::Receiver<Vec<ComputerConnection>>,
        options: ComputersOptions,
    ) -> ComputersSource {
        ComputersSource::new(id, list, options)
    }
}
