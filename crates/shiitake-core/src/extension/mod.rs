//! The extension host: how an extension adds state, commands, timers, attention,
//! prompt context and tools to Sessions, always through core transactions.
//!
//! An extension implements [`Extension`]. Its hooks ([`Extension::command`],
//! [`Extension::on_settled`], [`Extension::on_timer`]) are synchronous functions
//! over a [`Tx`]: namespaced collections of JSON values plus effects (admit a
//! prompt, set or clear a timer, raise or clear attention). The owner commits the
//! transaction with the triggering change, or none of it; a hook has no way to do
//! I/O. The host grants each extension explicitly ([`Grants`]); using anything not
//! granted fails with `not_granted`. A hook that fails or panics stops its
//! extension (its slot shows `stopped` with the reason) until the host resumes it;
//! other extensions and the Session keep working.
//!
//! `docs/extensions.md` is the tutorial; `examples/counter_extension.rs` is the
//! smallest complete extension.

mod definition;
mod grants;
pub mod host;
pub(crate) mod lifecycle;
mod tx;

use std::sync::Arc;

use serde_json::Value;
use shiitake_capabilities::Module;
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::{CommandId, SessionId, TerminalOutcome};

pub use definition::{ExtensionDefinition, Migration, MigrationTx, StateScope};
pub use grants::{Grant, Grants};
pub(crate) use tx::next_cron as tx_next_cron;
pub use tx::{Due, Origin, StateView, TimerId, Tx};

/// Why a hook did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The caller's input is wrong; the caller is told, the extension keeps running.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The extension has no such command.
    #[error("unknown command `{0}`")]
    UnknownCommand(String),
    /// The extension used something the host did not grant it.
    #[error("not granted: {0}")]
    NotGranted(Grant),
    /// The extension failed; it is stopped with this reason.
    #[error("{0}")]
    Failed(String),
}

/// A run of the Session settled; what settled hooks see.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The work item.
    pub command_id: CommandId,
    /// How it ended.
    pub outcome: TerminalOutcome,
    /// Who admitted it, when an extension did.
    pub origin: Option<Origin>,
}

/// A timer that came due; what timer hooks see.
#[derive(Clone, Debug, PartialEq)]
pub struct FiredTimer {
    /// The timer.
    pub id: TimerId,
    /// The Session it belongs to, for Session-scope timers.
    pub session_id: Option<SessionId>,
    /// What the extension stored with it.
    pub payload: Value,
    /// Unix milliseconds it was due at.
    pub due_at: u64,
}

/// What a run sees of the extension host when it starts; captured once per run.
#[derive(Clone)]
pub struct RunContext<'a> {
    /// The Session.
    pub session_id: &'a SessionId,
    /// Who admitted the run's prompt, when an extension did.
    pub origin: Option<&'a Origin>,
    /// The extension's committed state.
    pub state: StateView<'a>,
    pub(crate) files: Option<&'a FilesHandle>,
    pub(crate) grants: &'a Grants,
}

/// A file port the host hands an extension (such as a Knapsack `Files`), type-erased
/// so core does not depend on any one implementation.
pub type FilesHandle = Arc<dyn std::any::Any + Send + Sync>;

impl RunContext<'_> {
    /// The file port the host gave this extension, for its tool handlers.
    ///
    /// Fails with `NotGranted(Files)` without the grant, and `Invalid` when the host
    /// gave none or one of another type.
    pub fn files<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, HookError> {
        if !self.grants.has(Grant::Files) {
            return Err(HookError::NotGranted(Grant::Files));
        }
        let handle = self
            .files
            .ok_or_else(|| HookError::Invalid("the host gave no file port".into()))?;
        handle
            .clone()
            .downcast::<T>()
            .map_err(|_| HookError::Invalid("the host's file port is of another type".into()))
    }
}

impl std::fmt::Debug for RunContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("session_id", &self.session_id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// What an extension adds to one run.
#[derive(Default)]
pub struct Contribution {
    /// Quiet system context, bounded by the host (see [`host::PROMPT_SECTION_LIMIT`]).
    pub prompt_section: Option<String>,
    /// Model-facing operations; their handlers change state through a [`host::ToolTx`].
    /// Offered with the `tools` grant, or with `files` when the host handed the
    /// extension a file port ([`RunContext::files`]).
    pub tools: Option<Module>,
}

/// One extension: a definition plus hooks, all synchronous and free of I/O.
pub trait Extension: Send + Sync + 'static {
    /// Identity, namespace, scopes, schema version, migrations, configuration.
    fn definition(&self) -> &ExtensionDefinition;

    /// Handles a human or program command (`SessionExtensionControls::call` when
    /// `tx` has a Session, `AgentExtensionControls::call` otherwise).
    fn command(&self, _tx: &mut Tx<'_>, command: &str, _input: Value) -> Result<Value, HookError> {
        Err(HookError::UnknownCommand(command.to_owned()))
    }

    /// Runs in the transaction that commits a run's terminal.
    fn on_settled(&self, _tx: &mut Tx<'_>, _settled: &Settled) -> Result<(), HookError> {
        Ok(())
    }

    /// Runs in the transaction that claims a due timer.
    fn on_timer(&self, _tx: &mut Tx<'_>, _timer: &FiredTimer) -> Result<(), HookError> {
        Ok(())
    }

    /// What clients see of this extension in a Session (`null` when `None`).
    fn projection(&self, _state: &StateView<'_>) -> Option<Value> {
        None
    }

    /// What this extension adds to a run that is starting.
    fn contribute(&self, _run: &RunContext<'_>, _tools: host::ToolTx) -> Contribution {
        Contribution::default()
    }

    /// The human command flows this extension offers, as a `whistle.catalog/v1` catalog.
    fn catalog(&self) -> Option<Catalog> {
        None
    }
}
