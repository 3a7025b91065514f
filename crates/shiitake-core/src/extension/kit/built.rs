//! A built kit extension: the declarations behind core's [`Extension`] trait.

use std::marker::PhantomData;

use serde_json::Value;
use shiitake_capabilities::{Module, ModulePath};
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::extension::ExtensionContract;
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::{CommandScope, SessionId};

use super::Declarations;
use crate::extension::host::ToolTx;
use crate::extension::{
    Admitted, Contribution, Extension, ExtensionDefinition, FiredTimer, GateVerdict, GatedCall,
    Grants, HookError, RunContext, Settled, StateView, ToolOutcome, Tx,
};

/// An extension built from its declarations; register it with [`KitExtension::grants`].
pub struct KitExtension<C, R = ()> {
    definition: ExtensionDefinition,
    grants: Grants,
    declared: Declarations<R>,
    contract: PhantomData<fn() -> C>,
}

impl<C, R> KitExtension<C, R> {
    pub(super) fn new(
        definition: ExtensionDefinition,
        grants: Grants,
        declared: Declarations<R>,
    ) -> Self {
        Self {
            definition,
            grants,
            declared,
            contract: PhantomData,
        }
    }

    /// Exactly the grants its declarations use; what a host grants it unless the host
    /// decides to withhold something.
    pub fn grants(&self) -> Grants {
        self.grants.clone()
    }

    /// The commands it declares, with their scopes.
    pub fn commands(&self) -> impl Iterator<Item = (&str, CommandScope)> {
        self.declared
            .commands
            .iter()
            .map(|(name, command)| (name.as_str(), command.scope))
    }

    /// The input schema derived for each declared tool, by name.
    pub fn tool_schemas(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.declared
            .tools
            .iter()
            .map(|tool| (tool.name().as_str(), tool.schema()))
    }
}

fn run_hook<E>(
    hook: &Option<super::HookFn<E>>,
    tx: &mut Tx<'_>,
    event: &E,
) -> Result<(), HookError> {
    match hook {
        Some(hook) => hook(tx, event),
        None => Ok(()),
    }
}

impl<C, R> KitExtension<C, R>
where
    R: Clone + Send + Sync + 'static,
{
    /// The declared tools offered to this run, added to `extra`, the module the
    /// extension built itself for the run, if any.
    fn module(
        &self,
        run: &RunContext<'_>,
        tools: &ToolTx,
        extra: Option<Module>,
    ) -> Option<Module> {
        let facts = (self.declared.run_facts)(run);
        let declared: Vec<_> = self
            .declared
            .tools
            .iter()
            .filter_map(|tool| tool.operation(&facts, tools))
            .collect();
        let mut module = match extra {
            Some(module) => module,
            None if declared.is_empty() => return None,
            None => Module::new(
                ModulePath::new(&self.definition.namespace).ok()?,
                self.declared.tools_description.clone(),
            ),
        };
        for operation in declared {
            module = module.with_operation(operation).ok()?;
        }
        Some(module)
    }
}

impl<C, R> Extension for KitExtension<C, R>
where
    C: ExtensionContract,
    R: Clone + Send + Sync + 'static,
{
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command_scope(&self, command: &str) -> Option<CommandScope> {
        self.declared.commands.get(command).map(|c| c.scope)
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match self.declared.commands.get(command) {
            Some(declared) => (declared.handler)(tx, input),
            None => Err(HookError::UnknownCommand(command.to_owned())),
        }
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        run_hook(&self.declared.settled, tx, settled)?;
        if self.declared.gate.is_some() {
            super::gate::settled(tx, settled)?;
        }
        Ok(())
    }

    fn settled_uses_agent_state(&self) -> bool {
        // The gate's own settle reads and writes Session state alone.
        self.declared.settled.is_some()
    }

    fn gate(&self, tx: &mut Tx<'_>, call: &GatedCall) -> Result<GateVerdict, HookError> {
        match &self.declared.gate {
            Some(rule) => super::gate::decide(rule, tx, call),
            None => Ok(GateVerdict::Pass),
        }
    }

    fn on_tool_result(&self, tx: &mut Tx<'_>, outcome: &ToolOutcome) -> Result<(), HookError> {
        run_hook(&self.declared.tool_result, tx, outcome)
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        run_hook(&self.declared.timer, tx, timer)
    }

    fn on_admission(&self, tx: &mut Tx<'_>, admitted: &Admitted) -> Result<(), HookError> {
        run_hook(&self.declared.admission, tx, admitted)
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        self.declared.projection.as_ref()?(state)
    }

    fn footer(&self, state: &StateView<'_>) -> Vec<FooterRowV0> {
        match &self.declared.footer {
            Some(rows) => rows(state, &self.definition.id),
            None => Vec::new(),
        }
    }

    fn on_observed(&self, session_id: &SessionId) {
        if let Some(observed) = &self.declared.observed {
            observed(session_id);
        }
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let own = match &self.declared.run {
            Some(build) => build(run, tools.clone()),
            None => Contribution::default(),
        };
        let declared = self.declared.prompt.as_ref().and_then(|prompt| prompt(run));
        let prompt_section = match (declared, own.prompt_section) {
            (Some(declared), Some(own)) => Some(format!("{declared}\n\n{own}")),
            (declared, own) => declared.or(own),
        };
        Contribution {
            prompt_section,
            tools: self.module(run, &tools, own.tools),
            more_tools: own.more_tools,
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        self.declared.catalog.clone()
    }
}
