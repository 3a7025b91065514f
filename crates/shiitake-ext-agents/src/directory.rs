//! What the host supplies: its authorized Agent directory.

use async_trait::async_trait;
use shiitake_core::Agent;

use crate::contract::AgentName;

/// Why the directory refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// The host does not let this Agent create Agents, or not with that name.
    #[error("creating Agent {name} is not allowed: {reason}")]
    Refused {
        /// The name asked for.
        name: AgentName,
        /// Why, for the model.
        reason: String,
    },
    /// An Agent with that name exists.
    #[error("an Agent named {0} exists")]
    Exists(AgentName),
    /// Opening or creating it failed.
    #[error("Agent {name}: {reason}")]
    Failed {
        /// The Agent.
        name: AgentName,
        /// What went wrong.
        reason: String,
    },
}

/// The Agents a host lets its Agents reach, by name.
///
/// The host remains responsible for creation admission, Agent access and resource
/// lifetime: the extension asks, the directory decides. `agent` is synchronous because it
/// only looks up Agents the host already opened.
#[async_trait]
pub trait AgentDirectory: Send + Sync + 'static {
    /// The Agent named `name`, if the host lets Agents reach it.
    fn agent(&self, name: &AgentName) -> Option<Agent>;

    /// Every name, in the host's order (for the prompt section).
    fn names(&self) -> Vec<AgentName>;

    /// Creates (opens) an Agent named `name`, or refuses.
    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError>;
}
