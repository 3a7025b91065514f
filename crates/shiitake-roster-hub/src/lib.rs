//! The Hub roster: one hosted Agent with the shared set, Home and Subagents.
//!
//! [`HubAgent::open`] composes, with explicit grants, the shared set with every Ask
//! going to a person ([`SharedSet::waits_on_sender`] off), Home over the host's
//! Computers, approvals (`shiitake-ext-approval`, a person decides before a tool the
//! host's [`Policy`] asks about runs), and the `agents.*` tools (`shiitake-ext-agents`) over the host's
//! [`AgentDirectory`] with the Subagents footer reading their record. It takes any core
//! [`Store`]: `shiitake serve` gives it PostgreSQL tenant stores; the crate's tests run
//! on SQLite. It contains no extension rules.
//!
//! A host that serves one Agent alone gives it a [`SoleAgentDirectory`]: the Agent
//! reaches only itself, and creating Agents is refused with the host's reason.
//!
//! A host that serves every tenant of its database from each process (`shiitake serve
//! --database postgres://…`) uses the
//! [`HubDirectory`] ([`directory`]): over the host's [`TenantCatalog`], it opens a
//! tenant (all its Agents) on first use, gives each Agent a view of its own tenant
//! only, admits `agents.create` up to the host's bound, closes tenants that are idle,
//! keeps the number open bounded, and opens the tenants with work waiting.

pub mod directory;
mod sole;

pub use directory::{
    CatalogError, HubDirectory, HubDirectoryOptions, HubLimits, Swept, TenantCatalog,
};
pub use sole::SoleAgentDirectory;

use std::sync::Arc;

use shiitake_capabilities::Catalog;
use shiitake_core::store::Store;
use shiitake_core::{Agent, AgentConfig};
use shiitake_ext_approval::policy::Policy;
use shiitake_ext_home::{Computers, add_home};
use shiitake_ext_skills::SkillLibrary;
use shiitake_protocol::{AgentApi, AgentName};
pub use shiitake_roster_conversation_agents::{AgentDirectory, DirectoryError, SharedSet};
use shiitake_roster_conversation_agents::{add_conversation_agents, add_shared_set};

/// What a Hub host supplies for one Agent.
pub struct HubOptions {
    /// The Agent's name in the host's directory.
    pub name: AgentName,
    /// Its store (PostgreSQL on the Hub).
    pub store: Arc<dyn Store>,
    /// The tools its runs get besides the extensions'.
    pub tools: Arc<Catalog>,
    /// Model, retries, clock.
    pub config: AgentConfig,
    /// The host's skills, if any.
    pub skills: Option<Arc<SkillLibrary>>,
    /// The Computers Home chooses from, each port scoped by the host.
    pub computers: Arc<dyn Computers>,
    /// The Agents this one may reach.
    pub directory: Arc<dyn AgentDirectory>,
    /// Which tool calls wait for a person's approval (`shiitake-ext-approval`);
    /// [`Policy::asks_before_edits`] is the default `shiitake serve` gives.
    pub approval: Policy,
}

impl std::fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubOptions")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why the Agent could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("Hub Agent {agent}: {reason}")]
pub struct HubError {
    /// Which.
    pub agent: AgentName,
    /// Why.
    pub reason: String,
}

/// One Hub Agent and the tasks that serve it.
pub struct HubAgent {
    agent: Agent,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for HubAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubAgent").finish_non_exhaustive()
    }
}

impl HubAgent {
    /// Opens the Agent with the Hub composition and starts its tasks.
    pub async fn open(options: HubOptions) -> Result<Self, HubError> {
        let name = options.name.clone();
        let failed = |reason: String| HubError {
            agent: name.clone(),
            reason,
        };
        let mut config = options.config;
        // The tenant names its Sessions' addresses and its owners' log spans.
        config.name.get_or_insert_with(|| name.clone());
        let clock = config.clock.clone();
        let builder = Agent::builder(options.store, options.tools, config);
        let set = SharedSet {
            waits_on_sender: false,
            skills: options.skills,
        };
        let builder = add_shared_set(builder, &set).map_err(|error| failed(error.to_string()))?;
        let builder =
            add_home(builder, options.computers).map_err(|error| failed(error.to_string()))?;
        // On the Hub, approvals go to a person, like Asks.
        let approval = shiitake_ext_approval::extension(options.approval)
            .map_err(|error| failed(error.to_string()))?;
        let builder = builder.kit_extension(approval);
        let (builder, conversation) =
            add_conversation_agents(builder, options.name.clone(), options.directory, clock)
                .map_err(|error| failed(error.to_string()))?;
        let agent = builder
            .open()
            .await
            .map_err(|error| failed(error.message))?;
        let tasks = conversation.start(&agent);
        Ok(Self { agent, tasks })
    }

    /// The Agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Stops its tasks and closes it; accepted work stays durable.
    pub async fn close(self) -> Result<(), shiitake_protocol::ShiitakeError> {
        for task in &self.tasks {
            task.abort();
        }
        self.agent.close().await
    }
}
