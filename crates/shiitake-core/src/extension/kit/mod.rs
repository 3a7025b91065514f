//! The extension kit: one declaration per thing an extension offers, decoded and
//! routed by core, so an extension holds only its rules.
//!
//! An extension built with [`ExtensionKit`] declares its contract's commands (their
//! input, output and scope come from [`ContractCommand`]), its model tools (their input
//! schema is derived from the Rust input type and checked against the capabilities'
//! schema subset when the extension is built), its hooks, projection, footer rows,
//! prompt section and catalog. [`ExtensionKit::build`] gives a [`KitExtension`], an
//! ordinary [`Extension`](super::Extension) that knows the [`Grants`] it needs. Hooks stay synchronous and
//! run inside core transactions, as with a hand-written [`Extension`](super::Extension).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use shiitake_core::extension::kit::ExtensionKit;
//! use shiitake_core::extension::{HookError, StateScope};
//! use shiitake_protocol::extension::{ContractCommand, ExtensionContract, SessionScope};
//!
//! enum Counter {}
//! impl ExtensionContract for Counter {
//!     const EXTENSION_ID: &'static str = "example-counter";
//!     type Projection = u64;
//! }
//!
//! #[derive(Serialize, Deserialize)]
//! struct Increment { by: u64 }
//! impl ContractCommand for Increment {
//!     type Contract = Counter;
//!     type Scope = SessionScope;
//!     type Output = u64;
//!     const NAME: &'static str = "increment";
//! }
//!
//! let counter = ExtensionKit::<Counter>::new("counter")?
//!     .session_state()
//!     .command(|tx, input: Increment| {
//!         let count = tx.get::<u64>(StateScope::Session, "count", "n")?.unwrap_or(0) + input.by;
//!         tx.put(StateScope::Session, "count", "n", &count)?;
//!         Ok(count)
//!     })
//!     .projection(|state| state.get(StateScope::Session, "count", "n"))
//!     .build()?;
//! let grants = counter.grants();
//! # let _ = grants;
//! # Ok::<(), shiitake_core::extension::kit::KitError>(())
//! ```

mod built;
mod gate;
mod tool;

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shiitake_capabilities::Module;
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::extension::{ContractCommand, ExtensionContract, Scope};
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::{CommandScope, ExtensionId, SessionId};

pub use built::KitExtension;
pub use gate::HELD_COLLECTION;
pub use tool::{AsyncToolCall, Tool, ToolCall};

use super::host::ToolTx;
use super::{
    Admitted, Contribution, ExtensionDefinition, FiredTimer, GateVerdict, GatedCall, Grant, Grants,
    HookError, Migration, RunContext, Settled, StateScope, StateView, ToolOutcome, Tx,
};

/// Why an extension could not be built from its declarations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KitError {
    /// The contract's extension id is not a valid id.
    #[error("extension id `{id}`: {reason}")]
    Id {
        /// The id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool name is not a valid operation name.
    #[error("tool name `{name}`: {reason}")]
    Name {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool's input type has a schema outside the capabilities' subset.
    #[error("tool `{tool}`: its input schema is outside the supported subset: {reason}")]
    Schema {
        /// The tool.
        tool: String,
        /// Where and why.
        reason: String,
    },
    /// Two commands or two tools share a name.
    #[error("`{0}` is declared twice")]
    Duplicate(String),
}

/// A command's input as `K`. The host's `requestId` (its idempotence key) rides in the
/// input; a `K` that declares no field for it, and refuses unknown fields, is decoded
/// without it, so a contract type need not carry the host's key.
fn decode_command<K: DeserializeOwned>(input: Value) -> Result<K, serde_json::Error> {
    let error = match <K as serde::Deserialize>::deserialize(&input) {
        Ok(decoded) => return Ok(decoded),
        Err(error) => error,
    };
    match input {
        Value::Object(mut map) if map.contains_key("requestId") => {
            map.remove("requestId");
            serde_json::from_value(Value::Object(map))
        }
        _ => Err(error),
    }
}

type CommandFn = Arc<dyn Fn(&mut Tx<'_>, Value) -> Result<Value, HookError> + Send + Sync>;
type HookFn<E> = Box<dyn Fn(&mut Tx<'_>, &E) -> Result<(), HookError> + Send + Sync>;
type ObservedFn = Box<dyn Fn(&SessionId) + Send + Sync>;
type ProjectionFn = Box<dyn Fn(&StateView<'_>) -> Option<Value> + Send + Sync>;
type FooterFn = Box<dyn Fn(&StateView<'_>, &ExtensionId) -> Vec<FooterRowV0> + Send + Sync>;
type PromptFn = Box<dyn Fn(&RunContext<'_>) -> Option<String> + Send + Sync>;
type RunFn = Box<dyn Fn(&RunContext<'_>, ToolTx) -> Contribution + Send + Sync>;

/// One declared command: where it acts and its handler.
struct Command {
    scope: CommandScope,
    handler: CommandFn,
}

/// Everything declared, shared by the builder and the built extension.
struct Declarations<R> {
    commands: BTreeMap<String, Command>,
    tools: Vec<Tool<R>>,
    tools_description: String,
    run_facts: Box<dyn Fn(&RunContext<'_>) -> R + Send + Sync>,
    settled: Option<HookFn<Settled>>,
    tool_result: Option<HookFn<ToolOutcome>>,
    timer: Option<HookFn<FiredTimer>>,
    admission: Option<HookFn<Admitted>>,
    observed: Option<ObservedFn>,
    projection: Option<ProjectionFn>,
    footer: Option<FooterFn>,
    prompt: Option<PromptFn>,
    run: Option<RunFn>,
    catalog: Option<Catalog>,
    gate: Option<gate::GateRule>,
}

/// Declares an extension of contract `C` thing by thing; `R` is what each run's tool
/// handlers know of their run (see [`ExtensionKit::with_run_facts`]).
pub struct ExtensionKit<C: ExtensionContract, R = ()> {
    definition: ExtensionDefinition,
    grants: Grants,
    declared: Declarations<R>,
    duplicate: Option<String>,
    contract: PhantomData<fn() -> C>,
}

impl<C: ExtensionContract> ExtensionKit<C, ()> {
    /// An extension of contract `C` whose tools and commands live under `namespace`.
    pub fn new(namespace: &str) -> Result<Self, KitError> {
        Self::with_run_facts(namespace, |_| ())
    }
}

impl<C: ExtensionContract, R: Clone + Send + Sync + 'static> ExtensionKit<C, R> {
    /// An extension whose tool handlers see `facts(run)`, read once when a run starts
    /// (who admitted it, what the state was, the host's file port).
    pub fn with_run_facts(
        namespace: &str,
        facts: impl Fn(&RunContext<'_>) -> R + Send + Sync + 'static,
    ) -> Result<Self, KitError> {
        let id = ExtensionId::new(C::EXTENSION_ID).map_err(|error| KitError::Id {
            id: C::EXTENSION_ID.to_owned(),
            reason: error.to_string(),
        })?;
        Ok(Self {
            definition: ExtensionDefinition {
                id,
                namespace: namespace.to_owned(),
                scopes: Vec::new(),
                schema_version: 1,
                migrations: Vec::new(),
                configuration: serde_json::json!({}),
            },
            grants: Grants::none(),
            declared: Declarations {
                commands: BTreeMap::new(),
                tools: Vec::new(),
                tools_description: String::new(),
                run_facts: Box::new(facts),
                settled: None,
                tool_result: None,
                timer: None,
                admission: None,
                observed: None,
                projection: None,
                footer: None,
                prompt: None,
                run: None,
                catalog: None,
                gate: None,
            },
            duplicate: None,
            contract: PhantomData,
        })
    }

    fn grant(mut self, grant: Grant) -> Self {
        self.grants = self.grants.with(grant);
        self
    }

    fn state(mut self, scope: StateScope) -> Self {
        if !self.definition.scopes.contains(&scope) {
            self.definition.scopes.push(scope);
        }
        self.grant(Grant::State)
    }

    /// Keeps state per Session.
    #[must_use]
    pub fn session_state(self) -> Self {
        self.state(StateScope::Session)
    }

    /// Keeps state for the whole Agent.
    #[must_use]
    pub fn agent_state(self) -> Self {
        self.state(StateScope::Agent)
    }

    /// The state's shape version and the steps that bring older state to it.
    #[must_use]
    pub fn schema(mut self, version: u32, migrations: Vec<Migration>) -> Self {
        self.definition.schema_version = version;
        self.definition.migrations = migrations;
        self
    }

    /// Host-chosen settings, part of the extension's revision.
    #[must_use]
    pub fn configuration(mut self, configuration: Value) -> Self {
        self.definition.configuration = configuration;
        self
    }

    /// Also asks for `grant`, for what no declaration implies (timers, admissions,
    /// attention, the file port).
    #[must_use]
    pub fn uses(self, grant: Grant) -> Self {
        self.grant(grant)
    }

    fn insert_command(mut self, name: &str, scope: CommandScope, handler: CommandFn) -> Self {
        let command = Command { scope, handler };
        if self
            .declared
            .commands
            .insert(name.to_owned(), command)
            .is_some()
        {
            self.duplicate.get_or_insert_with(|| name.to_owned());
        }
        self.grant(Grant::Commands)
    }

    /// A command of the contract: its name, scope, input and output are `K`'s; the
    /// host decodes the input and refuses it on the other scope's route.
    #[must_use]
    pub fn command<K, F>(self, handler: F) -> Self
    where
        K: ContractCommand<Contract = C> + DeserializeOwned + 'static,
        K::Output: Serialize,
        F: Fn(&mut Tx<'_>, K) -> Result<K::Output, HookError> + Send + Sync + 'static,
    {
        let handler: CommandFn = Arc::new(move |tx, input| {
            let input: K = decode_command(input)
                .map_err(|error| HookError::Invalid(format!("{}: {error}", K::NAME)))?;
            let output = handler(tx, input)?;
            serde_json::to_value(output).map_err(|error| HookError::Failed(error.to_string()))
        });
        self.insert_command(K::NAME, <K::Scope as Scope>::KIND, handler)
    }

    /// A command outside the typed contract, such as a catalog flow's step, with its
    /// scope; its input and output are plain JSON.
    #[must_use]
    pub fn untyped_command(
        self,
        name: &str,
        scope: CommandScope,
        handler: impl Fn(&mut Tx<'_>, Value) -> Result<Value, HookError> + Send + Sync + 'static,
    ) -> Self {
        self.insert_command(name, scope, Arc::new(handler))
    }

    /// A model tool, offered under the extension's namespace.
    #[must_use]
    pub fn tool(mut self, tool: Tool<R>) -> Self {
        if self.declared.tools.iter().any(|t| t.name() == tool.name()) {
            self.duplicate
                .get_or_insert_with(|| tool.name().as_str().to_owned());
        }
        self.declared.tools.push(tool);
        self.grant(Grant::Tools)
    }

    /// What the model is told the tool module is for.
    #[must_use]
    pub fn tools_description(mut self, description: &str) -> Self {
        self.declared.tools_description = description.to_owned();
        self
    }

    /// Tools built per run by the extension itself (tools over a port the kit does not
    /// know, such as a Computer's files); offered beside the declared ones.
    #[must_use]
    pub fn run_tools(
        mut self,
        tools: impl Fn(&RunContext<'_>, ToolTx) -> Option<Module> + Send + Sync + 'static,
    ) -> Self {
        self.declared.run = Some(Box::new(move |run, tx| Contribution {
            tools: tools(run, tx),
            ..Contribution::default()
        }));
        self.grant(Grant::Tools)
    }

    /// Like [`ExtensionKit::run_tools`], with the prompt section built from the same
    /// reading of the port, so a run is told exactly about the tools it gets (Home's
    /// Computers, read once per run). Its section follows any `.prompt` section.
    #[must_use]
    pub fn run_contribution(
        mut self,
        contribution: impl Fn(&RunContext<'_>, ToolTx) -> Contribution + Send + Sync + 'static,
    ) -> Self {
        self.declared.run = Some(Box::new(contribution));
        self.grant(Grant::Prompt).grant(Grant::Tools)
    }

    /// Runs in the transaction that settles a prompt of the Session.
    #[must_use]
    pub fn on_settled(
        mut self,
        hook: impl Fn(&mut Tx<'_>, &Settled) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Self {
        self.declared.settled = Some(Box::new(hook));
        self
    }

    /// Runs in the transaction that commits the result of one of its tools.
    #[must_use]
    pub fn on_tool_result(
        mut self,
        hook: impl Fn(&mut Tx<'_>, &ToolOutcome) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Self {
        self.declared.tool_result = Some(Box::new(hook));
        self
    }

    /// Runs in the transaction that claims one of its due timers.
    #[must_use]
    pub fn on_timer(
        mut self,
        hook: impl Fn(&mut Tx<'_>, &FiredTimer) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Self {
        self.declared.timer = Some(Box::new(hook));
        self.grant(Grant::Timers)
    }

    /// Runs with the door's answer to a prompt it admitted into another Session.
    #[must_use]
    pub fn on_admission(
        mut self,
        hook: impl Fn(&mut Tx<'_>, &Admitted) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Self {
        self.declared.admission = Some(Box::new(hook));
        self.grant(Grant::Admissions)
    }

    /// Learns that a client reads a Session (see [`super::Extension::on_observed`]).
    #[must_use]
    pub fn on_observed(mut self, hook: impl Fn(&SessionId) + Send + Sync + 'static) -> Self {
        self.declared.observed = Some(Box::new(hook));
        self.grant(Grant::Projection)
    }

    /// What clients decode through the contract, per Session.
    #[must_use]
    pub fn projection(
        mut self,
        projection: impl Fn(&StateView<'_>) -> Option<C::Projection> + Send + Sync + 'static,
    ) -> Self
    where
        C::Projection: Serialize,
    {
        self.declared.projection = Some(Box::new(move |state| {
            projection(state).and_then(|value| serde_json::to_value(value).ok())
        }));
        self.grant(Grant::Projection)
    }

    /// The rows it shows in the Session's footer; `id` is the extension's own, for
    /// [`FooterRowV0::new`].
    #[must_use]
    pub fn footer(
        mut self,
        rows: impl Fn(&StateView<'_>, &ExtensionId) -> Vec<FooterRowV0> + Send + Sync + 'static,
    ) -> Self {
        self.declared.footer = Some(Box::new(rows));
        self.grant(Grant::Projection)
    }

    /// Quiet context for a run that is starting.
    #[must_use]
    pub fn prompt(
        mut self,
        section: impl Fn(&RunContext<'_>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.declared.prompt = Some(Box::new(section));
        self.grant(Grant::Prompt)
    }

    /// A tool gate: `rule` is asked, in one owner transaction, before every tool call
    /// of a run (whoever offers the tool) and answers allow, deny with the reason the
    /// model reads, ask (hold the call until this extension's Session state changes,
    /// then ask again), or pass. The kit records each held call, so an allowed call
    /// starts only after that is committed, and after a restart `rule` is asked again
    /// only about a call it held that never started (see `extension::gate`). Needs the
    /// `gate` grant, which `grants()` then includes, and Session state.
    #[must_use]
    pub fn tool_gate(
        mut self,
        rule: impl Fn(&mut Tx<'_>, &GatedCall) -> Result<GateVerdict, HookError> + Send + Sync + 'static,
    ) -> Self {
        self.declared.gate = Some(Box::new(rule));
        self.session_state().grant(Grant::Gate)
    }

    /// The human command flows it offers, built for its id.
    #[must_use]
    pub fn catalog(mut self, catalog: impl FnOnce(ExtensionId) -> Catalog) -> Self {
        self.declared.catalog = Some(catalog(self.definition.id.clone()));
        self
    }

    /// The extension, or why its declarations do not hold together.
    pub fn build(self) -> Result<KitExtension<C, R>, KitError> {
        if let Some(name) = self.duplicate {
            return Err(KitError::Duplicate(name));
        }
        Ok(KitExtension::new(
            self.definition,
            self.grants,
            self.declared,
        ))
    }
}
