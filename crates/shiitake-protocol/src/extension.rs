//! What clients see of extensions: slots in observations, statuses, typed contracts.
//!
//! An extension publishes a projection per Session; the Agent encodes it as an
//! [`ExtensionSlotV0`] under the extension's id in `extensions` of snapshots and
//! frames (absent means unavailable). A client that knows the extension's
//! [`ExtensionContract`] decodes a slot into an [`ExtensionViewV0`] of the
//! contract's projection type, and calls the contract's commands with
//! [`BoundSessionExtension`] or [`BoundAgentExtension`]; the scope of each
//! command is part of its type, so a Session-bound handle cannot call an
//! Agent-scope command.
//!
//! ```
//! use serde::Serialize;
//! use shiitake_protocol::extension::*;
//!
//! struct Counter;
//! impl ExtensionContract for Counter {
//!     const EXTENSION_ID: &'static str = "example-counter";
//!     type Projection = u32;
//! }
//!
//! #[derive(Serialize)]
//! struct Increment { by: u32 }
//! impl ContractCommand for Increment {
//!     type Contract = Counter;
//!     type Scope = SessionScope;
//!     type Output = u32;
//!     const NAME: &'static str = "increment";
//! }
//!
//! async fn bump<S: shiitake_protocol::SessionApi>(session: &S) -> Result<u32, shiitake_protocol::ShiitakeError> {
//!     bind_session_extension::<_, Counter>(session).call(&Increment { by: 1 }).await
//! }
//! ```
//!
//! The same call with an Agent-scope command does not compile:
//!
//! ```compile_fail
//! use serde::Serialize;
//! use shiitake_protocol::extension::*;
//!
//! struct Counter;
//! impl ExtensionContract for Counter {
//!     const EXTENSION_ID: &'static str = "example-counter";
//!     type Projection = u32;
//! }
//!
//! #[derive(Serialize)]
//! struct ResetAll;
//! impl ContractCommand for ResetAll {
//!     type Contract = Counter;
//!     type Scope = AgentScope;
//!     type Output = ();
//!     const NAME: &'static str = "reset_all";
//! }
//!
//! async fn reset<S: shiitake_protocol::SessionApi>(session: &S) -> Result<(), shiitake_protocol::ShiitakeError> {
//!     bind_session_extension::<_, Counter>(session).call(&ResetAll).await
//! }
//! ```

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{AgentApi, SessionApi};
use crate::bounded::ExtensionId;
use crate::error::ShiitakeError;
use crate::snapshot::SessionExtensionSlots;

/// One extension's encoded state in an observation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExtensionSlotV0 {
    /// The extension stopped; its reason is kept until it is resumed.
    Stopped {
        /// Why it stopped.
        reason: String,
    },
    /// The extension runs; `value` is its projection for this Session (`null` when it has none).
    Running {
        /// The encoded projection.
        value: Value,
    },
}

/// What one client sees of an extension, with the projection decoded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExtensionViewV0<P> {
    /// The observation carries no slot for the extension.
    Unavailable,
    /// The extension stopped.
    Stopped {
        /// Why it stopped.
        reason: String,
    },
    /// The extension runs.
    Running {
        /// Its projection, if it published one.
        value: Option<P>,
    },
}

/// Whether an extension of an Agent runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExtensionRunState {
    /// It runs.
    Running,
    /// It stopped and waits for `resume`.
    Stopped {
        /// Why it stopped.
        reason: String,
    },
}

/// One extension of an Agent as listed by the Agent's extension controls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionStatusV0 {
    /// The extension.
    pub extension_id: ExtensionId,
    /// Its namespace, such as `question`.
    pub namespace: String,
    /// The stable hash of its identity, schema version, migrations and configuration.
    pub revision: String,
    /// Running or stopped.
    #[serde(flatten)]
    pub state: ExtensionRunState,
}

/// Why a slot or command output did not decode through a contract.
#[derive(Debug, thiserror::Error)]
#[error("extension {extension_id}: {what} does not match the contract: {source}")]
pub struct ContractDecodeError {
    /// The extension.
    pub extension_id: String,
    /// What was being decoded.
    pub what: &'static str,
    /// The decode failure.
    #[source]
    pub source: serde_json::Error,
}

impl From<ContractDecodeError> for ShiitakeError {
    fn from(error: ContractDecodeError) -> Self {
        ShiitakeError::internal(error.to_string())
    }
}

/// The scope a command runs in; sealed to [`SessionScope`] and [`AgentScope`].
pub trait Scope: sealed::Sealed + Send + Sync + 'static {
    /// The same scope as a value, for a host that routes commands at run time.
    const KIND: CommandScope;
}

/// Where a command acts, as a value: a host refuses a command on the other scope's
/// route, and keeps its idempotency receipt in its own scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandScope {
    /// On one Session: `SessionExtensionControls::call`.
    Session,
    /// On the whole Agent: `AgentExtensionControls::call`.
    Agent,
}

impl CommandScope {
    /// The wire name, `session` or `agent`.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandScope::Session => "session",
            CommandScope::Agent => "agent",
        }
    }
}

impl std::fmt::Display for CommandScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Commands that act on one Session.
#[derive(Debug)]
pub enum SessionScope {}

/// Commands that act on the whole Agent.
#[derive(Debug)]
pub enum AgentScope {}

impl Scope for SessionScope {
    const KIND: CommandScope = CommandScope::Session;
}
impl Scope for AgentScope {
    const KIND: CommandScope = CommandScope::Agent;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::SessionScope {}
    impl Sealed for super::AgentScope {}
}

/// The shared description of one extension that clients compile against.
pub trait ExtensionContract: Send + Sync + 'static {
    /// The extension's identity, such as `botanical-session-question`.
    const EXTENSION_ID: &'static str;
    /// What the extension publishes per Session.
    type Projection: DeserializeOwned + Send;
}

/// One command of a contract: its input is `Self`, its output and scope are types.
pub trait ContractCommand: Serialize + Send + Sync {
    /// The contract this command belongs to.
    type Contract: ExtensionContract;
    /// Session or Agent.
    type Scope: Scope;
    /// What the command answers.
    type Output: DeserializeOwned + Send;
    /// The command's wire name.
    const NAME: &'static str;
}

/// Declares several commands of one contract at once: each type's wire name, scope
/// and output, one line each.
///
/// ```
/// use serde::Serialize;
/// use shiitake_protocol::{contract_commands, extension_contract};
///
/// extension_contract! {
///     /// The counter: it publishes the count.
///     pub Counter = "example-counter", projection u64
/// }
/// #[derive(Serialize)]
/// struct Increment { by: u64 }
/// #[derive(Serialize)]
/// struct ResetAll {}
///
/// contract_commands!(Counter {
///     Increment => "increment" in SessionScope -> u64,
///     ResetAll => "reset_all" in AgentScope -> (),
/// });
/// ```
#[macro_export]
macro_rules! contract_commands {
    ($contract:ty { $($command:ty => $name:literal in $scope:ident -> $output:ty),* $(,)? }) => {
        $(
            impl $crate::extension::ContractCommand for $command {
                type Contract = $contract;
                type Scope = $crate::extension::$scope;
                type Output = $output;
                const NAME: &'static str = $name;
            }
        )*
    };
}

/// Declares a contract's marker and its [`ExtensionContract`] impl in one call: an
/// uninhabited `enum` (only ever a type parameter, never a value) with the given doc
/// attributes, its extension id (any `&'static str` constant expression) and its
/// projection type.
///
/// ```
/// use shiitake_protocol::extension::{ExtensionContract, bind_session_extension};
///
/// const EXTENSION_ID: &str = "example-counter";
///
/// shiitake_protocol::extension_contract! {
///     /// The counter's contract: it publishes the Session's count.
///     pub CounterContract = EXTENSION_ID, projection u64
/// }
///
/// assert_eq!(<CounterContract as ExtensionContract>::EXTENSION_ID, "example-counter");
///
/// fn bound<S: shiitake_protocol::SessionApi>(session: &S) {
///     let _counter = bind_session_extension::<_, CounterContract>(session);
/// }
/// ```
#[macro_export]
macro_rules! extension_contract {
    ($(#[$meta:meta])* $vis:vis $name:ident = $id:expr, projection $projection:ty $(,)?) => {
        $(#[$meta])*
        #[derive(::core::fmt::Debug)]
        $vis enum $name {}

        impl $crate::extension::ExtensionContract for $name {
            const EXTENSION_ID: &'static str = $id;
            type Projection = $projection;
        }
    };
}

/// The attributes of a model tool's input type, for [`apply`](crate::apply):
/// `Serialize` and `Deserialize` with camelCase fields, and, under the using crate's
/// `runtime` feature, a derived `schemars::JsonSchema` that refuses unknown fields (the
/// schema the kit advertises). The type adds its own derives (`Clone`, `Debug`, ...)
/// after it, and its own field attributes (`schemars(length(..))` bounds).
///
/// The crate using it must depend on `serde` (with `derive`) and, under its `runtime`
/// feature, on `schemars`: the feature is evaluated in that crate, so its contract
/// still builds without schemars when `runtime` is off.
///
/// ```
/// use shiitake_protocol::{apply, tool_input};
///
/// /// The input of a model tool `counter.add`.
/// #[apply(tool_input!)]
/// #[derive(Clone, Debug, PartialEq, Eq)]
/// pub struct AddInput {
///     /// How much to add.
///     pub add_by: u32,
/// }
///
/// let input: AddInput = serde_json::from_str(r#"{"addBy": 2}"#)?;
/// assert_eq!(input, AddInput { add_by: 2 });
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! tool_input {
    ($item:item) => {
        #[derive(::serde::Serialize, ::serde::Deserialize)]
        #[cfg_attr(
            feature = "runtime",
            derive(::schemars::JsonSchema),
            schemars(deny_unknown_fields)
        )]
        #[serde(rename_all = "camelCase")]
        $item
    };
}

/// Decodes one contract's slot out of an observation's `extensions`.
pub fn view<C: ExtensionContract>(
    slots: &SessionExtensionSlots,
) -> Result<ExtensionViewV0<C::Projection>, ContractDecodeError> {
    let found = slots.iter().find(|(id, _)| id.as_str() == C::EXTENSION_ID);
    match found.map(|(_, slot)| slot) {
        None => Ok(ExtensionViewV0::Unavailable),
        Some(ExtensionSlotV0::Stopped { reason }) => Ok(ExtensionViewV0::Stopped {
            reason: reason.clone(),
        }),
        Some(ExtensionSlotV0::Running { value: Value::Null }) => {
            Ok(ExtensionViewV0::Running { value: None })
        }
        Some(ExtensionSlotV0::Running { value }) => serde_json::from_value(value.clone())
            .map(|value| ExtensionViewV0::Running { value: Some(value) })
            .map_err(|source| ContractDecodeError {
                extension_id: C::EXTENSION_ID.to_owned(),
                what: "projection",
                source,
            }),
    }
}

fn contract_id<C: ExtensionContract>() -> Result<ExtensionId, ShiitakeError> {
    ExtensionId::new(C::EXTENSION_ID).map_err(ShiitakeError::from)
}

fn encode_input<K: ContractCommand>(input: &K) -> Result<Value, ShiitakeError> {
    serde_json::to_value(input).map_err(|error| {
        ShiitakeError::invalid(format!(
            "command {} input does not encode: {error}",
            K::NAME
        ))
    })
}

fn decode_output<K: ContractCommand>(output: Value) -> Result<K::Output, ShiitakeError> {
    serde_json::from_value(output).map_err(|source| {
        ContractDecodeError {
            extension_id: <K::Contract as ExtensionContract>::EXTENSION_ID.to_owned(),
            what: "command output",
            source,
        }
        .into()
    })
}

/// One Session bound to one extension contract.
#[derive(Debug)]
pub struct BoundSessionExtension<'s, S, C> {
    session: &'s S,
    contract: PhantomData<fn() -> C>,
}

/// Binds `session` to the contract `C`: typed Session-scope calls and views.
pub fn bind_session_extension<S: SessionApi, C: ExtensionContract>(
    session: &S,
) -> BoundSessionExtension<'_, S, C> {
    BoundSessionExtension {
        session,
        contract: PhantomData,
    }
}

impl<S: SessionApi, C: ExtensionContract> BoundSessionExtension<'_, S, C> {
    /// Decodes this extension's slot of an observation.
    pub fn view(
        &self,
        slots: &SessionExtensionSlots,
    ) -> Result<ExtensionViewV0<C::Projection>, ContractDecodeError> {
        view::<C>(slots)
    }

    /// Calls one Session-scope command of the contract.
    pub async fn call<K>(&self, input: &K) -> Result<K::Output, ShiitakeError>
    where
        K: ContractCommand<Contract = C, Scope = SessionScope>,
    {
        let output = self
            .session
            .call_extension(&contract_id::<C>()?, K::NAME, encode_input(input)?)
            .await?;
        decode_output::<K>(output)
    }
}

/// One Agent bound to one extension contract's Agent-scope commands.
#[derive(Debug)]
pub struct BoundAgentExtension<'a, A, C> {
    agent: &'a A,
    contract: PhantomData<fn() -> C>,
}

/// Binds `agent` to the contract `C`: typed Agent-scope calls.
pub fn bind_agent_extension<A: AgentApi, C: ExtensionContract>(
    agent: &A,
) -> BoundAgentExtension<'_, A, C> {
    BoundAgentExtension {
        agent,
        contract: PhantomData,
    }
}

impl<A: AgentApi, C: ExtensionContract> BoundAgentExtension<'_, A, C> {
    /// Calls one Agent-scope command of the contract.
    pub async fn call<K>(&self, input: &K) -> Result<K::Output, ShiitakeError>
    where
        K: ContractCommand<Contract = C, Scope = AgentScope>,
    {
        let output = self
            .agent
            .call_extension(&contract_id::<C>()?, K::NAME, encode_input(input)?)
            .await?;
        decode_output::<K>(output)
    }
}
