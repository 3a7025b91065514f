//! The context of one open Agent: what its owners' tasks, its timer scheduler and
//! its multi-process watch share.
//!
//! It lives apart from the [`Agent`](crate::Agent) facade so the tasks that need
//! several of these services do not import the facade. Parts that need one or two
//! take those instead: an owner gets [`OwnerDeps`], a run its `RunDeps`, a
//! [`LocalSession`](crate::LocalSession) only the registry of owners.

use std::sync::Arc;

use shiitake_capabilities::Catalog;
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::extension::agent_scope::AgentScopeDeps;
use crate::extension::host::Host;
use crate::owner::OwnerDeps;
use crate::owner::registry::Registry;
use crate::store::{Ownership, Store};

/// What the tasks of one Agent share.
pub(crate) struct AgentCore {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tools: Arc<Catalog>,
    pub(crate) config: Arc<AgentConfig>,
    pub(crate) owners: Arc<Registry>,
    pub(crate) host: Arc<Host>,
    /// Cancelled by `close`: the timer scheduler and the multi-process tasks stop.
    pub(crate) closing: CancellationToken,
    /// Leases and forwarding when several processes share the store; `None` when
    /// this process is the store's only user.
    pub(crate) ownership: Option<Arc<dyn Ownership>>,
}

impl AgentCore {
    /// What an owner of this Agent uses.
    pub(crate) fn owner_deps(&self) -> OwnerDeps {
        OwnerDeps {
            store: self.store.clone(),
            tools: self.tools.clone(),
            config: self.config.clone(),
            host: self.host.clone(),
        }
    }

    /// What Agent-scope extension routines of this Agent use.
    pub(crate) fn agent_scope_deps(&self) -> AgentScopeDeps<'_> {
        AgentScopeDeps {
            store: &*self.store,
            host: &self.host,
            clock: &*self.config.clock,
        }
    }
}
