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
//! Most extensions are written with the [`kit`], which implements this trait from one
//! declaration per command, tool, hook and view. `docs/extensions.md` is the tutorial;
//! `crates/shiitake-ext-testkit/examples/counter_extension.rs` is the smallest complete
//! extension.

mod admission;
mod agent_lock;
pub(crate) mod agent_scope;
pub mod cadence;
mod definition;
pub mod gate;
mod grants;
pub mod host;
pub mod kit;
pub(crate) mod lifecycle;
mod tx;

use std::sync::Arc;

use serde_json::Value;
use shiitake_capabilities::Module;
pub use shiitake_protocol::CommandScope;
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::{CommandId, SessionId, ShiitakeError, TerminalOutcome};

pub use crate::store::StateScope;
pub(crate) use admission::Delivery;
pub use admission::{AdmissionOutcome, Admitted};
pub(crate) use cadence::next_after as tx_next_cron;
pub use definition::{ExtensionDefinition, Migration, MigrationTx};
pub use gate::{GateMoment, GateVerdict, GatedCall, ParkCause};
pub use grants::{Grant, Grants};
pub(crate) use tx::Provenance;
pub use tx::{Due, Origin, Sender, StateView, TimerId, Tx};

/// Why a hook did not do what it was asked.
///
/// Every variant but [`Failed`](Self::Failed) answers the caller and keeps the
/// extension running; over the wire each is a [`ShiitakeError`] with its own code
/// (the `From` impl below), so a client can tell a malformed request (`invalid`)
/// from one that names nothing (`not_found`) or lost a race (`conflict`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The caller's input is wrong; the caller is told, the extension keeps running.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The input names something the extension does not hold (an unknown id):
    /// `not_found` (HTTP 404).
    #[error("not found: {0}")]
    NotFound(String),
    /// The input is well formed but contradicts the extension's state, such as an
    /// answer to a question that was already answered: `conflict` (HTTP 409).
    #[error("conflict: {0}")]
    Conflict(String),
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

impl From<HookError> for ShiitakeError {
    /// How a hook's refusal answers its caller; a failed extension answers `stopped`.
    fn from(error: HookError) -> Self {
        match error {
            HookError::Invalid(message) => ShiitakeError::invalid(message),
            HookError::NotFound(message) => ShiitakeError::not_found(message),
            HookError::Conflict(message) => ShiitakeError::conflict(message),
            HookError::UnknownCommand(command) => {
                ShiitakeError::not_found(format!("no command `{command}`"))
            }
            HookError::NotGranted(grant) => {
                ShiitakeError::not_granted(format!("the extension was not granted {grant}"))
            }
            HookError::Failed(reason) => ShiitakeError::stopped(reason),
        }
    }
}

/// An accepted prompt of the Session settled; what settled hooks see.
///
/// That is a run that ended (with the steers it absorbed), or a prompt cancelled
/// before it ran (outcome `cancelled`, no tool calls).
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The work item.
    pub command_id: CommandId,
    /// How it ended.
    pub outcome: TerminalOutcome,
    /// Who admitted it, when an extension did.
    pub origin: Option<Origin>,
    /// The Agent that sent it, when the host admitted it for another Agent.
    pub sender: Option<Sender>,
    /// How many tool calls the run's model asked for, those made before a restart
    /// included, so an extension can tell a turn that did work from one that only
    /// talked. Work settled without running again (interrupted on open) counts 0.
    pub tool_calls: u32,
    /// The tokens the run's model answers reported (`usage.totalTokens`, summed over
    /// its calls, those committed before a restart included), so an extension can
    /// bound what its own turns cost; 0 where the provider reports no usage.
    pub tokens: u64,
}

/// A call of one of this extension's tools got its committed result; what
/// tool-result hooks see.
///
/// The hook runs in the transaction that commits the result, so state that must
/// hold until the model has really received something (a delivery receipt) can be
/// released exactly when the result is durable, and not before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The extension whose tool was called.
    pub extension_id: shiitake_protocol::ExtensionId,
    /// The run.
    pub command_id: CommandId,
    /// The id the handler saw in its invocation context; stable across a replay after restart.
    pub execution_id: shiitake_capabilities::ExecutionId,
    /// The provider tool name the model called, such as `question__ask`.
    pub tool_name: String,
    /// Whether the committed result is an error result (including "outcome unknown"
    /// after a restart and "aborted").
    pub is_error: bool,
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
    /// The run's work item; every tool call's execution id is `<command id>:<call id>`,
    /// and settled hooks see it again as [`Settled::command_id`].
    pub command_id: &'a CommandId,
    /// Who admitted the run's prompt, when an extension did.
    pub origin: Option<&'a Origin>,
    /// The Agent that sent the run's prompt, when the host admitted it for another Agent.
    pub sender: Option<&'a Sender>,
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
            .field("command_id", &self.command_id)
            .field("origin", &self.origin)
            .field("sender", &self.sender)
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
    /// Further modules offered on the same terms, each its own tool namespace (Home
    /// offers `files` and, for Computers that run commands, `commands` and `jobs`).
    pub more_tools: Vec<Module>,
}

/// One extension: a definition plus hooks, all synchronous and free of I/O.
pub trait Extension: Send + Sync + 'static {
    /// Identity, namespace, scopes, schema version, migrations, configuration.
    fn definition(&self) -> &ExtensionDefinition;

    /// Where command `command` acts, when the extension declares it: the host then
    /// refuses it on the other scope's route and keeps its idempotency receipt in its
    /// own scope. `None` (the default) leaves the route to decide.
    fn command_scope(&self, _command: &str) -> Option<CommandScope> {
        None
    }

    /// Handles a human or program command (`SessionExtensionControls::call` when
    /// `tx` has a Session, `AgentExtensionControls::call` otherwise).
    fn command(&self, _tx: &mut Tx<'_>, command: &str, _input: Value) -> Result<Value, HookError> {
        Err(HookError::UnknownCommand(command.to_owned()))
    }

    /// Runs in the transaction that commits a run's terminal, or the terminal of a
    /// prompt cancelled before it ran.
    fn on_settled(&self, _tx: &mut Tx<'_>, _settled: &Settled) -> Result<(), HookError> {
        Ok(())
    }

    /// Whether [`Extension::on_settled`] reads or writes Agent-scope state. A settle
    /// takes the Agent-transaction lock (across processes, on a store several share)
    /// only when some extension with Agent scope says so, so settles of different
    /// Sessions need not take turns for an extension that keeps Agent state for its
    /// commands and timers alone. The default says so, since the host cannot see
    /// whether `on_settled` was written; an extension that says not is held to it:
    /// Agent state is not there for its settled hook, which fails if it asks.
    fn settled_uses_agent_state(&self) -> bool {
        true
    }

    /// Runs in the transaction that commits the result of a call of one of this
    /// extension's tools (see [`ToolOutcome`]).
    fn on_tool_result(&self, _tx: &mut Tx<'_>, _outcome: &ToolOutcome) -> Result<(), HookError> {
        Ok(())
    }

    /// Runs in the transaction that claims a due timer.
    fn on_timer(&self, _tx: &mut Tx<'_>, _timer: &FiredTimer) -> Result<(), HookError> {
        Ok(())
    }

    /// Runs, in an Agent-scope transaction, with the door's answer to a prompt this
    /// extension admitted with [`Tx::admit_into`]; once per delivery.
    fn on_admission(&self, _tx: &mut Tx<'_>, _admitted: &Admitted) -> Result<(), HookError> {
        Ok(())
    }

    /// What clients see of this extension in a Session (`null` when `None`).
    fn projection(&self, _state: &StateView<'_>) -> Option<Value> {
        None
    }

    /// The rows this extension shows in the Session's footer (see
    /// [`shiitake_protocol::footer`]); shown with the `projection` grant, bounded by the host.
    fn footer(&self, _state: &StateView<'_>) -> Vec<FooterRowV0> {
        Vec::new()
    }

    /// A client is reading this Session: a snapshot was read, or a watch or a
    /// subscription began. Called with the `projection` grant, on the Session's owner
    /// outside any transaction, so it must return at once and do no I/O.
    ///
    /// It is for an extension whose projection shows something read from elsewhere (other
    /// Sessions, other Agents): it learns that someone looks, refreshes on its own task,
    /// and shows the result with
    /// [`LocalSession::republish_extensions`](crate::LocalSession::republish_extensions).
    fn on_observed(&self, _session_id: &SessionId) {}

    /// Decides, in one owner transaction, whether a tool call of a run may run now
    /// (see [`gate`]); asked only with the `gate` grant, before every call. What the
    /// transaction records commits before the runner acts on the verdict. The default
    /// has nothing to say ([`GateVerdict::Pass`]).
    fn gate(&self, _tx: &mut Tx<'_>, _call: &GatedCall) -> Result<GateVerdict, HookError> {
        Ok(GateVerdict::Pass)
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
