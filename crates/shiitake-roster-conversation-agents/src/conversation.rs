//! Conversation agents on one Agent: the `agents.*` extension and the Subagents footer
//! it feeds, wired to each other and added with exactly their grants.
//!
//! The Local and Hub rosters compose an Agent the same way here: the footer reads the
//! `agents.*` record ([`ConversationAgents::source`]) and is told at once when a
//! Session records a child ([`ConversationAgents::notify`]). The two tasks they need
//! start once the Agent is open ([`ConversationTasks::start`]).

use std::sync::Arc;

use shiitake_core::clock::Clock;
use shiitake_core::extension::kit::KitError;
use shiitake_core::{Agent, AgentBuilder};
use shiitake_ext_agents::{AgentDirectory, ConversationAgents};
use shiitake_ext_subagents::Refresher;
use shiitake_protocol::AgentName;

/// Why conversation agents could not be added to an Agent.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The `agents.*` extension could not be built.
    #[error("agents: {0}")]
    Agents(KitError),
    /// The Subagents extension could not be built.
    #[error("subagents: {0}")]
    Subagents(KitError),
}

/// The tasks conversation agents need once the Agent is open; kept by the host
/// between building the Agent and opening it.
#[derive(Debug)]
pub struct ConversationTasks {
    agents: ConversationAgents,
    refresher: Refresher,
}

impl ConversationTasks {
    /// Starts the Subagents refresher and the `agents.*` runtime (its turn-end task) on
    /// the opened `agent`; abort the handles when the Agent closes.
    pub fn start(self, agent: &Agent) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = vec![self.refresher.spawn(agent.clone())];
        tasks.extend(self.agents.start(agent.clone()));
        tasks
    }
}

/// Adds Subagents (over the `agents.*` record, timed by `clock`, the Agent's clock)
/// and the `agents.*` extension of the Agent `me` in `directory`, each with exactly the
/// grants it declares; start the returned tasks once the Agent is open.
pub fn add_conversation_agents(
    builder: AgentBuilder,
    me: AgentName,
    directory: Arc<dyn AgentDirectory>,
    clock: Arc<dyn Clock>,
) -> Result<(AgentBuilder, ConversationTasks), ConversationError> {
    let (extension, agents) =
        shiitake_ext_agents::extension(me, directory).map_err(ConversationError::Agents)?;
    let (subagents, refresher) =
        shiitake_ext_subagents::extension(Arc::new(agents.source()), clock)
            .map_err(ConversationError::Subagents)?;
    agents.notify(refresher.handle());
    let builder = builder.kit_extension(subagents).kit_extension(extension);
    Ok((builder, ConversationTasks { agents, refresher }))
}
