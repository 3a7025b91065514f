//! An Agent over the A2A protocol (v1.0, JSON-RPC binding with SSE): being built.

use std::sync::Arc;
use std::time::Duration;

use shiitake_protocol::AgentApi;

/// Who the Agent is, for its card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentIdentity {
    /// The Agent's name (its directory name).
    pub name: String,
    /// One line on what it does.
    pub description: String,
}

/// The A2A routes of `agent` (none yet).
pub fn router<A>(agent: Arc<A>, identity: AgentIdentity, keep_alive: Duration) -> axum::Router
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let _ = (agent, identity, keep_alive);
    axum::Router::new()
}
