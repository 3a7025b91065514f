//! A directory of one Agent, for a host that serves one Agent per process.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_protocol::AgentName;
use shiitake_roster_conversation_agents::{AgentDirectory, DirectoryError};

/// The directory a Hub Agent sees when its process serves it alone: its own name,
/// and a refusal to create others. The Agent is set once it is open, because the
/// roster needs the directory before the Agent exists.
#[derive(Debug)]
pub struct SoleAgentDirectory {
    name: AgentName,
    refusal: String,
    agent: OnceLock<Agent>,
}

impl SoleAgentDirectory {
    /// A directory holding `name` only; `agents.create` is refused with `refusal`.
    pub fn new(name: AgentName, refusal: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            name,
            refusal: refusal.into(),
            agent: OnceLock::new(),
        })
    }

    /// Makes the opened Agent reachable by its name; a second call is ignored.
    pub fn set(&self, agent: Agent) {
        let _first_wins = self.agent.set(agent);
    }
}

#[async_trait]
impl AgentDirectory for SoleAgentDirectory {
    fn agent(&self, name: &AgentName) -> Option<Agent> {
        (name == &self.name)
            .then(|| self.agent.get().cloned())
            .flatten()
    }

    fn names(&self) -> Vec<AgentName> {
        vec![self.name.clone()]
    }

    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        Err(DirectoryError::Refused {
            name: name.clone(),
            reason: self.refusal.clone(),
        })
    }
}
