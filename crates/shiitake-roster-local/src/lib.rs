//! The Local roster: a directory of Agents in one data directory, on SQLite.
//!
//! [`LocalDirectory::open`] opens every Agent of a data directory (the default Agent
//! `main` in `<data-dir>/shiitake.db`, each other in `<data-dir>/agents/<name>.db`)
//! and composes each with explicit grants:
//!
//! - the shared set ([`add_shared_set`]): questions (an Ask raised during work another
//!   Agent sent waits on that Agent first), goals, loops, plans, Almanac, skills;
//! - Home over the host's Computers ([`add_home`]);
//! - for the default Agent, the browser App bridge when the host gives one
//!   ([`LocalOptions::ui`]);
//! - conversation agents
//!   ([`add_conversation_agents`](shiitake_roster_conversation_agents::add_conversation_agents)):
//!   the `agents.*` extension (`shiitake-ext-agents`: `agents.create` makes a new Agent
//!   in this directory, `agents.send`, `agents.answer`, `agents.escalate`) and
//!   Subagents reading its record of each Session.
//!
//! Each Agent's runs offer their model the tool set of its profile
//! ([`LocalOptions::offered_tools`]): a small model, such as the bundled one, gets the
//! file tools and `question` and so creates no Agent, loop or schedule unless the host
//! names those tools.
//!
//! It runs the tasks those need (the Subagents refresher, the turn-end task) and stops
//! them on [`LocalDirectory::close`]. The directory is what `shiitake serve` serves
//! ([`shiitake_server::directory_router`]). It contains no extension rules.

mod agent;
mod options;

use std::sync::{Arc, RwLock, Weak};

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_protocol::{AgentApi, AgentName, ShiitakeError};
use shiitake_roster_conversation_agents::{AgentDirectory, DirectoryError};
use shiitake_server::Caller;

pub use options::{CreatePolicy, LocalOptions};
pub use shiitake_ext_home::add_home;
pub use shiitake_roster_conversation_agents::{SharedSet, add_shared_set};

use agent::Opened;

/// Why the directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A file or directory of the data directory.
    #[error("{path}: {reason}")]
    Io {
        /// Where.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// An Agent's store could not be opened.
    #[error("Agent {agent}: {reason}")]
    Agent {
        /// Which.
        agent: AgentName,
        /// Why.
        reason: String,
    },
}

struct Inner {
    options: LocalOptions,
    /// Every open Agent, in the directory's order (the default first).
    agents: RwLock<Vec<(AgentName, Opened)>>,
    /// Held while an Agent is created, so two creates of one name make one Agent.
    creating: tokio::sync::Mutex<()>,
}

impl Inner {
    fn agents(&self) -> std::sync::RwLockReadGuard<'_, Vec<(AgentName, Opened)>> {
        self.agents
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn find(&self, name: &AgentName) -> Option<Agent> {
        self.agents()
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, opened)| Agent::clone(&opened.agent))
    }

    fn names(&self) -> Vec<AgentName> {
        self.agents().iter().map(|(name, _)| name.clone()).collect()
    }

    fn served(&self, name: &AgentName) -> Option<Arc<Agent>> {
        self.agents()
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, opened)| opened.agent.clone())
    }

    fn insert(&self, name: AgentName, opened: Opened) {
        self.agents
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((name, opened));
    }
}

/// Creates the Agent `name` unless the policy refuses or it exists.
async fn create(inner: &Arc<Inner>, name: &AgentName) -> Result<Agent, DirectoryError> {
    if let CreatePolicy::Refuse(reason) = &inner.options.create {
        return Err(DirectoryError::Refused {
            name: name.clone(),
            reason: reason.clone(),
        });
    }
    let _one_at_a_time = inner.creating.lock().await;
    if inner.find(name).is_some() {
        return Err(DirectoryError::Exists(name.clone()));
    }
    let opened = agent::open(&inner.options, name, reference(inner))
        .await
        .map_err(|error| DirectoryError::Failed {
            name: name.clone(),
            reason: error.to_string(),
        })?;
    let created = Agent::clone(&opened.agent);
    inner.insert(name.clone(), opened);
    Ok(created)
}

/// Several Agents in one data directory; cloning is cheap and shares them.
#[derive(Clone)]
pub struct LocalDirectory {
    inner: Arc<Inner>,
    default: Agent,
}

impl std::fmt::Debug for LocalDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDirectory")
            .field("data_dir", &self.inner.options.data_dir)
            .field("agents", &self.inner.names())
            .finish_non_exhaustive()
    }
}

impl LocalDirectory {
    /// Opens every Agent of `options.data_dir` (creating the default Agent on first
    /// start) and starts their tasks. Work that was running resumes.
    pub async fn open(options: LocalOptions) -> Result<Self, LocalError> {
        let agents_dir = options.agents_dir();
        std::fs::create_dir_all(&agents_dir).map_err(|error| LocalError::Io {
            path: agents_dir.display().to_string(),
            reason: error.to_string(),
        })?;
        let others = agent::stored_names(&agents_dir, &options.default_agent)?;
        let default_name = options.default_agent.clone();
        let inner = Arc::new(Inner {
            options,
            agents: RwLock::new(Vec::new()),
            creating: tokio::sync::Mutex::new(()),
        });
        let opened = agent::open(&inner.options, &default_name, reference(&inner)).await?;
        let directory = Self {
            default: Agent::clone(&opened.agent),
            inner,
        };
        directory.insert(default_name, opened);
        for name in others {
            let opened =
                agent::open(&directory.inner.options, &name, reference(&directory.inner)).await?;
            directory.insert(name, opened);
        }
        Ok(directory)
    }

    fn insert(&self, name: AgentName, opened: Opened) {
        self.inner.insert(name, opened);
    }

    /// The Agent named `name`.
    pub fn agent(&self, name: &AgentName) -> Option<Agent> {
        self.inner.find(name)
    }

    /// The Session a local address of this directory names, on the Agent it names
    /// (no Agent segment: the default Agent), without I/O: an unknown Session fails on
    /// first use. An address of another origin, or of an Agent this directory does not
    /// hold, is `invalid`.
    pub fn session_at(
        &self,
        address: &shiitake_protocol::SessionAddress,
    ) -> Result<shiitake_core::LocalSession, shiitake_protocol::ShiitakeError> {
        use shiitake_protocol::{AddressOrigin, AgentApi, ShiitakeError};
        if address.origin() != &AddressOrigin::Local {
            return Err(ShiitakeError::invalid(format!(
                "{address} is a Session of a server; reach it with a RemoteAgent"
            )));
        }
        let name = address
            .agent()
            .cloned()
            .unwrap_or_else(|| self.default_name());
        let agent = self.agent(&name).ok_or_else(|| {
            ShiitakeError::invalid(format!(
                "{address} names the Agent {name}, which this directory does not hold"
            ))
        })?;
        Ok(agent.session(address.session_id().clone()))
    }

    /// The default Agent (`main` unless the options say otherwise).
    pub fn default_agent(&self) -> Agent {
        self.default.clone()
    }

    /// The default Agent's name.
    pub fn default_name(&self) -> AgentName {
        self.inner.options.default_agent.clone()
    }

    /// Every Agent's name: the default first, then the others in the order they were
    /// found or created.
    pub fn names(&self) -> Vec<AgentName> {
        self.inner.names()
    }

    /// Creates the Agent `name` in this data directory (as `agents.create` does), or
    /// returns why not.
    pub async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        create(&self.inner, name).await
    }

    /// Stops every Agent's tasks and closes the Agents; accepted work stays durable.
    pub async fn close(&self) {
        let opened: Vec<(AgentName, Opened)> = std::mem::take(
            &mut *self
                .inner
                .agents
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (name, opened) in opened {
            for task in &opened.tasks {
                task.abort();
            }
            if let Err(error) = opened.agent.close().await {
                tracing::warn!(agent = %name, %error, "an Agent did not close cleanly");
            }
        }
    }
}

/// The directory as its Agents reach it.
fn reference(inner: &Arc<Inner>) -> Arc<dyn AgentDirectory> {
    Arc::new(DirectoryRef(Arc::downgrade(inner)))
}

/// The directory as the Agents in it see it, without keeping it alive.
struct DirectoryRef(Weak<Inner>);

#[async_trait]
impl AgentDirectory for DirectoryRef {
    fn agent(&self, name: &AgentName) -> Option<Agent> {
        self.0.upgrade()?.find(name)
    }

    fn names(&self) -> Vec<AgentName> {
        self.0
            .upgrade()
            .map(|inner| inner.names())
            .unwrap_or_default()
    }

    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        let inner = self.0.upgrade().ok_or_else(|| DirectoryError::Failed {
            name: name.clone(),
            reason: "the directory is closing".into(),
        })?;
        create(&inner, name).await
    }
}

/// The server's view: Local has one caller, the operator, who reaches every Agent.
#[async_trait]
impl shiitake_server::AgentDirectoryApi for LocalDirectory {
    type Agent = Agent;

    async fn agent(&self, name: &AgentName, caller: &Caller) -> Result<Arc<Agent>, ShiitakeError> {
        let not_found = || ShiitakeError::not_found(format!("no Agent named {name}"));
        match caller {
            Caller::Operator => self.inner.served(name).ok_or_else(not_found),
            Caller::Tenant(_) => Err(not_found()),
        }
    }

    async fn names(&self, caller: &Caller) -> Result<Vec<AgentName>, ShiitakeError> {
        Ok(match caller {
            Caller::Operator => self.inner.names(),
            Caller::Tenant(_) => Vec::new(),
        })
    }

    fn default_name(&self, caller: &Caller) -> Option<AgentName> {
        match caller {
            Caller::Operator => Some(self.inner.options.default_agent.clone()),
            Caller::Tenant(_) => None,
        }
    }
}
